"""Kubernetes' format library: ``format.<name>().validate(<string>)``.

Upstream (``k8s.io/apiserver/pkg/cel/library/format.go``)::

    format.dns1123Label() Format (and dns1123Subdomain, dns1035Label,
        qualifiedName, dns1123LabelPrefix, dns1123SubdomainPrefix,
        dns1035LabelPrefix, labelValue, uri, uuid, byte, date, datetime)
    <Format>.validate(<string>) optional<list<string>>   none when valid

    format.named(<string>) optional<Format>      none for an unknown name

cel-cpp takes no optional value back from a Python function, so
``validate`` and ``format.named`` return a ``kubernetes.Optional`` value with
the members rules use on an optional: ``hasValue()`` and ``value()`` (typed
``dyn``; an error on none, as upstream's ``optional.none() dereference``).
``orValue()`` is not available on them: cel-cpp's runtime handles
``orValue`` itself and never dispatches it to a Python overload. So
``!format.dns1123Label().validate(self.name).hasValue()``,
``format.named('dns1123Label').value().validate(x).hasValue()`` read as
upstream. Not the same: ``type()`` of those values names the message, and
they do not compare equal to ``optional.none()``.
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
    errors = FORMATS[fmt.value](text)
    return types.new_optional("E" + "\0".join(errors) if errors else None)


def named(name: str) -> Any:
    return types.new_optional("F" + name if name in FORMATS else None)


def _value(optional: Any) -> Any:
    text = optional.value
    if not text:
        raise ValueError("optional.none() dereference")
    if text[0] == "F":
        return types.new_format(text[1:])
    return [e for e in text[1:].split("\0") if e]


def extension() -> cel.CelExtension:
    constructors = [
        cel.FunctionDecl(f"format.{name}", [cel.Overload(f"format_{name}", types.FORMAT, [],
                                                         impl=lambda name=name: types.new_format(name))])
        for name in FORMATS
    ]
    member = {"is_member": True}
    return cel.CelExtension("k8py.format", [
        *constructors,
        cel.FunctionDecl("format.named", [cel.Overload("format_named_string", types.OPTIONAL, [T.STRING], impl=named)]),
        cel.FunctionDecl("validate", [cel.Overload("format_validate_string", types.OPTIONAL,
                                                   [types.FORMAT, T.STRING], impl=validate, **member)]),
        # one overload per member: cel-cpp's runtime tells overloads apart by kind, and both optionals are messages
        cel.FunctionDecl("hasValue", [cel.Overload("k8py_optional_has_value", T.BOOL, [types.OPTIONAL],
                                                   impl=lambda m: bool(m.value), **member)]),
        cel.FunctionDecl("value", [cel.Overload("k8py_optional_value", T.DYN, [types.OPTIONAL], impl=_value,
                                                **member)]),
    ])
