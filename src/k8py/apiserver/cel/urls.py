"""Kubernetes' URL library: ``url()`` and the accessors of ``kubernetes.URL``.

Upstream (``k8s.io/apiserver/pkg/cel/library/urls.go``) parses with Go's
``url.ParseRequestURI``: an absolute URL (``https://host/path``) or an
absolute path (``/path``); anything else is an error::

    url(<string>) URL, isURL(<string>) bool
    <URL>.getScheme() string, .getHost() string (with port; IPv6 in brackets),
    .getHostname() string (no port, no brackets), .getPort() string,
    .getEscapedPath() string, .getQuery() map<string, list<string>>

The URL keeps its original text; accessors parse it again (cheap, cached).
"""

from __future__ import annotations

import functools
import urllib.parse
from typing import Any

from cel_expr_python import cel

from k8py.apiserver.cel import types

__all__ = ["extension", "parse_request_uri"]

T = cel.Type


@functools.lru_cache(maxsize=1024)
def parse_request_uri(text: str) -> urllib.parse.SplitResult:
    """``url.ParseRequestURI``'s acceptance, on :mod:`urllib.parse`'s parser."""
    if not text:
        raise ValueError('URL parse error during conversion from string: parse "": empty url')
    parsed = urllib.parse.urlsplit(text)
    if not (parsed.scheme and (parsed.netloc or parsed.path.startswith("/"))) and not text.startswith("/"):
        raise ValueError(f'URL parse error during conversion from string: parse "{text}": '
                         "invalid URI for request")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise ValueError(f'URL parse error during conversion from string: parse "{text}": '
                         "net/url: invalid control character in URL")
    if " " in parsed.netloc:  # Go accepts a space in the path (getEscapedPath gives %20), not in the host
        raise ValueError(f'URL parse error during conversion from string: parse "{text}": '
                         "invalid character \" \" in host name")
    return parsed


def to_url(text: str) -> Any:
    parse_request_uri(text)
    return types.new_url(text)


def is_url(text: str) -> bool:
    try:
        parse_request_uri(text)
    except ValueError:
        return False
    return True


def _parts(url: Any) -> urllib.parse.SplitResult:
    return parse_request_uri(url.value)


def get_scheme(url: Any) -> str:
    return _parts(url).scheme


def get_host(url: Any) -> str:
    netloc = _parts(url).netloc
    return netloc.rsplit("@", 1)[-1]


def get_hostname(url: Any) -> str:
    host = get_host(url)
    if host.startswith("["):
        return host[1:host.index("]")] if "]" in host else host[1:]
    return host.split(":", 1)[0]


def get_port(url: Any) -> str:
    host = get_host(url)
    if host.startswith("["):
        rest = host[host.index("]") + 1:] if "]" in host else ""
        return rest[1:] if rest.startswith(":") else ""
    return host.split(":", 1)[1] if ":" in host else ""


def get_escaped_path(url: Any) -> str:
    return urllib.parse.quote(urllib.parse.unquote(_parts(url).path), safe="/:@!$&'()*+,;=-._~")


def get_query(url: Any) -> dict[str, list[str]]:
    return urllib.parse.parse_qs(_parts(url).query, keep_blank_values=True)


def extension() -> cel.CelExtension:
    def accessor(name: str, result: Any, impl: Any) -> cel.FunctionDecl:
        return cel.FunctionDecl(name, [cel.Overload(f"url_{name}", result, [types.URL], is_member=True, impl=impl)])

    return cel.CelExtension("k8py.urls", [
        cel.FunctionDecl("url", [cel.Overload("string_to_url", types.URL, [T.STRING], impl=to_url)]),
        cel.FunctionDecl("isURL", [cel.Overload("is_url_string", T.BOOL, [T.STRING], impl=is_url)]),
        accessor("getScheme", T.STRING, get_scheme),
        accessor("getHost", T.STRING, get_host),
        accessor("getHostname", T.STRING, get_hostname),
        accessor("getPort", T.STRING, get_port),
        accessor("getEscapedPath", T.STRING, get_escaped_path),
        accessor("getQuery", T.Map(T.STRING, T.List(T.STRING)), get_query),
    ])
