"""Kubernetes' format library: ``format.<name>().validate(<string>)``.

Upstream (``k8s.io/apiserver/pkg/cel/library/format.go``)::

    format.dns1123Label() Format (and dns1123Subdomain, dns1035Label,
        qualifiedName, dns1123LabelPrefix, dns1123SubdomainPrefix,
        dns1035LabelPrefix, labelValue, uri, uuid, byte, date, datetime)
    <Format>.validate(<string>) optional<list<string>>   none when valid

cel-cpp takes no optional value back from a Python function, so
``validate`` returns a ``kubernetes.FormatErrors`` value instead, with the
two members rules use on that optional: ``hasValue()`` (there are errors)
and ``value()`` (the error messages, upstream's wording). So
``!format.dns1123Label().validate(self.name).hasValue()`` reads as upstream;
``orValue`` and ``format.named(<string>)`` are not available.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import re
import urllib.parse
from typing import Any, Callable

from cel_expr_python import cel

from k8py.api.names import (
    is_dns1035_label, is_dns1123_label, is_dns1123_subdomain, is_qualified_name, is_valid_label_value,
)
from k8py.apiserver.cel import types

__all__ = ["extension", "FORMATS"]

T = cel.Type
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def _prefix(check: Callable[[str], list[str]]) -> Callable[[str], list[str]]:
    # a generateName prefix: a trailing '-' is allowed (upstream maskTrailingDash)
    return lambda s: check(s[:-1] + "a" if len(s) > 1 and s.endswith("-") else s)


def _uri(s: str) -> list[str]:
    parsed = urllib.parse.urlsplit(s)
    return [] if parsed.scheme and (parsed.netloc or parsed.path) else ["invalid URI"]


def _uuid(s: str) -> list[str]:
    return [] if _UUID.match(s) else ["does not match the UUID format"]


def _byte(s: str) -> list[str]:
    try:
        base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):
        return ["invalid base64"]
    return []


def _date(s: str) -> list[str]:
    try:
        datetime.date.fromisoformat(s)
    except ValueError:
        return ["invalid date"]
    return [] if re.fullmatch(r"\d{4}-\d{2}-\d{2}", s) else ["invalid date"]


def _datetime(s: str) -> list[str]:
    try:
        datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        return ["invalid datetime"]
    return []


FORMATS: dict[str, Callable[[str], list[str]]] = {
    "dns1123Label": is_dns1123_label,
    "dns1123Subdomain": is_dns1123_subdomain,
    "dns1035Label": is_dns1035_label,
    "qualifiedName": is_qualified_name,
    "dns1123LabelPrefix": _prefix(is_dns1123_label),
    "dns1123SubdomainPrefix": _prefix(is_dns1123_subdomain),
    "dns1035LabelPrefix": _prefix(is_dns1035_label),
    "labelValue": is_valid_label_value,
    "uri": _uri,
    "uuid": _uuid,
    "byte": _byte,
    "date": _date,
    "datetime": _datetime,
}


def validate(fmt: Any, text: str) -> Any:
    return types.new_format_errors(FORMATS[fmt.value](text))


def _errors(message: Any) -> list[str]:
    return [e for e in message.value.split("\0") if e] if message.value else []


def extension() -> cel.CelExtension:
    constructors = [
        cel.FunctionDecl(f"format.{name}", [cel.Overload(f"format_{name}", types.FORMAT, [],
                                                         impl=lambda name=name: types.new_format(name))])
        for name in FORMATS
    ]
    return cel.CelExtension("k8py.format", [
        *constructors,
        cel.FunctionDecl("validate", [cel.Overload("format_validate_string", types.FORMAT_ERRORS,
                                                   [types.FORMAT, T.STRING], is_member=True, impl=validate)]),
        cel.FunctionDecl("hasValue", [cel.Overload("format_errors_has_value", T.BOOL, [types.FORMAT_ERRORS],
                                                   is_member=True, impl=lambda m: bool(m.value))]),
        cel.FunctionDecl("value", [cel.Overload("format_errors_value", T.List(T.STRING), [types.FORMAT_ERRORS],
                                                is_member=True, impl=_errors)]),
    ])
