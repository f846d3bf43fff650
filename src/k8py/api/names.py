"""Name, label and annotation validation with upstream's exact wording.

Why: kubectl and the official clients show the API server's messages verbatim
(``metadata.name: Invalid value: "Foo": a lowercase RFC 1123 subdomain must
...``), and tests written against a real cluster compare them. So every
message here follows apimachinery's ``util/validation`` and
``api/validation`` text, including its quirks (the double space in
``'MyValue',  or 'my_value'``, byte lengths rather than character counts).

Two layers:

* ``is_*`` checks return ``list[str]`` of detail messages (empty = valid),
  like upstream ``IsDNS1123Subdomain``. ``NameValidator`` functions take
  ``(name, prefix)`` where ``prefix=True`` validates a ``generateName`` (a
  trailing ``-`` is allowed there).
* ``validate_object_meta`` turns them into ``Cause`` entries: ``field`` is the
  path (``metadata.name``), ``message`` is upstream's error body
  (``Invalid value: "Foo": <detail>``) and ``reason`` the ``CauseType``.

The field-error bodies (``field_invalid`` …, ``go_quote``) live in
:mod:`k8py.api.field_errors` and are re-exported here.

Invariant: pure functions, no I/O; regexes are matched against the whole
string (Go's ``^...$`` has no trailing-newline loophole, so ``fullmatch``).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping
from typing import Any

from k8py.api.errors import Cause
from k8py.api.field_errors import field_forbidden, field_invalid, field_required, field_too_long, go_quote, go_value

__all__ = [
    "NameValidator",
    "is_dns1123_subdomain",
    "is_dns1123_label",
    "is_dns1035_label",
    "is_qualified_name",
    "is_valid_label_value",
    "is_valid_path_segment_name",
    "name_is_dns_subdomain",
    "name_is_dns_label",
    "name_is_dns1035_label",
    "name_is_path_segment",
    "validate_labels",
    "validate_annotations",
    "validate_object_meta",
    "generate_name",
    "field_invalid",
    "field_required",
    "field_forbidden",
    "field_too_long",
    "go_quote",
    "go_value",
    "TOTAL_ANNOTATION_SIZE_LIMIT",
    "MAX_GENERATED_NAME_BASE",
]

NameValidator = Callable[[str, bool], list[str]]
"""``(name, prefix) -> messages``; ``prefix=True`` checks a generateName."""

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
QUALIFIED_NAME_MAX = 63
LABEL_VALUE_MAX = 63
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + r"(\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character"
)
_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1035_LABEL_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
    "start with an alphabetic character, and end with an alphanumeric character"
)
_QNAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QNAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_LABEL_VALUE_FMT = "(" + _QNAME_FMT + ")?"
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, "
    "'-', '_' or '.', and must start and end with an alphanumeric character"
)

_DNS1123_LABEL_RE = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
_DNS1035_LABEL_RE = re.compile(_DNS1035_LABEL_FMT)
_QNAME_RE = re.compile(_QNAME_FMT)
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)


def _blen(s: str) -> int:
    """Go's ``len``: bytes, not characters."""
    if s.isascii():
        return len(s)
    return len(s.encode("utf-8", "surrogatepass"))


#: strings known to pass a check: label keys and values and annotation keys
#: repeat across the objects of a workload (every pod of a ReplicaSet carries
#: its template's), and the checks cost a split and a regex or two each. Only
#: passes are remembered (an error is rebuilt each time: its message names the
#: field); each set is bounded, emptied when full.
_PASSED_LIMIT = 8192
_GOOD_QUALIFIED: set[str] = set()
_GOOD_LABEL_VALUES: set[str] = set()
_GOOD_ANNOTATION_KEYS: set[str] = set()


def _passed(seen: set[str], value: str) -> None:
    if len(seen) >= _PASSED_LIMIT:
        seen.clear()
    seen.add(value)


def _max_len_error(n: int) -> str:
    return f"must be no more than {n} characters"


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    # Upstream appends "'x', " per example joined by " or ", hence the double space.
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def is_dns1123_label(value: str) -> list[str]:
    errs = []
    if _blen(value) > DNS1123_LABEL_MAX:
        errs.append(_max_len_error(DNS1123_LABEL_MAX))
    if not _DNS1123_LABEL_RE.fullmatch(value):
        if _DNS1123_SUBDOMAIN_RE.fullmatch(value):
            errs.append("must not contain dots")
        else:
            errs.append(
                _regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc")
            )
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    errs = []
    if _blen(value) > DNS1123_SUBDOMAIN_MAX:
        errs.append(_max_len_error(DNS1123_SUBDOMAIN_MAX))
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        errs.append(_regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_dns1035_label(value: str) -> list[str]:
    errs = []
    if _blen(value) > DNS1123_LABEL_MAX:
        errs.append(_max_len_error(DNS1123_LABEL_MAX))
    if not _DNS1035_LABEL_RE.fullmatch(value):
        errs.append(_regex_error(_DNS1035_LABEL_MSG, _DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return errs


def is_qualified_name(value: str) -> list[str]:
    """Label keys, annotation keys, finalizers: ``[prefix/]name``."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in is_dns1123_subdomain(prefix))
    else:
        return [
            "a qualified name "
            + _regex_error(_QNAME_MSG, _QNAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif _blen(name) > QUALIFIED_NAME_MAX:
        errs.append("name part " + _max_len_error(QUALIFIED_NAME_MAX))
    if not _QNAME_RE.fullmatch(name):
        errs.append(
            "name part " + _regex_error(_QNAME_MSG, _QNAME_FMT, "MyName", "my.name", "123-abc")
        )
    return errs


def is_valid_label_value(value: str) -> list[str]:
    errs = []
    if _blen(value) > LABEL_VALUE_MAX:
        errs.append(_max_len_error(LABEL_VALUE_MAX))
    if not _LABEL_VALUE_RE.fullmatch(value):
        examples = ("MyValue", "my_value", "12345")
        errs.append(_regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, *examples))
    return errs


def is_valid_path_segment_name(name: str, prefix: bool = False) -> list[str]:
    """Names that only need to be one URL path segment (e.g. RBAC roles)."""
    if not prefix and name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in name]


def _mask_trailing_dash(name: str) -> str:
    # A generateName "web-" is fine: a random suffix follows the dash.
    return name[:-1] + "a" if len(name) > 1 and name.endswith("-") else name


def name_is_dns_subdomain(name: str, prefix: bool = False) -> list[str]:
    return is_dns1123_subdomain(_mask_trailing_dash(name) if prefix else name)


def name_is_dns_label(name: str, prefix: bool = False) -> list[str]:
    return is_dns1123_label(_mask_trailing_dash(name) if prefix else name)


def name_is_dns1035_label(name: str, prefix: bool = False) -> list[str]:
    """Services (upstream ``ValidateServiceName``) use DNS-1035, not 1123."""
    return is_dns1035_label(_mask_trailing_dash(name) if prefix else name)


def name_is_path_segment(name: str, prefix: bool = False) -> list[str]:
    return is_valid_path_segment_name(name, prefix)


# --- object metadata ----------------------------------------------------------


def validate_labels(labels: Mapping[str, str] | None, field: str) -> list[Cause]:
    causes: list[Cause] = []
    for key, value in (labels or {}).items():
        if key not in _GOOD_QUALIFIED:
            if msgs := is_qualified_name(key):
                causes.extend(field_invalid(field, key, m) for m in msgs)
            else:
                _passed(_GOOD_QUALIFIED, key)
        if not isinstance(value, str):
            causes.append(field_invalid(field, value, "must be a string"))
            continue
        if value not in _GOOD_LABEL_VALUES:
            if msgs := is_valid_label_value(value):
                causes.extend(field_invalid(field, value, m) for m in msgs)
            else:
                _passed(_GOOD_LABEL_VALUES, value)
    return causes


def validate_annotations(annotations: Mapping[str, str] | None, field: str) -> list[Cause]:
    """Keys are qualified names (case-insensitive); keys+values ≤ 256 KiB in total."""
    causes: list[Cause] = []
    total = 0
    for key, value in (annotations or {}).items():
        if key not in _GOOD_ANNOTATION_KEYS:
            if msgs := is_qualified_name(key.lower()):
                causes.extend(field_invalid(field, key, m) for m in msgs)
            else:
                _passed(_GOOD_ANNOTATION_KEYS, key)
        total += _blen(key) + _blen(value if isinstance(value, str) else str(value))
    if total > TOTAL_ANNOTATION_SIZE_LIMIT:
        causes.append(field_too_long(field, TOTAL_ANNOTATION_SIZE_LIMIT))
    return causes


def _validate_owner_references(refs: list[Any], field: str) -> list[Cause]:
    causes: list[Cause] = []
    first_controller = ""
    for ref in refs:
        if not isinstance(ref, Mapping):
            causes.append(field_invalid(field, ref, "must be an object"))
            continue
        api_version = ref.get("apiVersion") or ""
        version = api_version.rsplit("/", 1)[-1]
        if not version:
            causes.append(
                field_invalid(f"{field}.apiVersion", api_version, "version must not be empty")
            )
        for key in ("kind", "name", "uid"):
            if not ref.get(key):
                causes.append(
                    field_invalid(f"{field}.{key}", ref.get(key) or "", f"{key} must not be empty")
                )
        if ref.get("controller") is True:
            current = f"{ref.get('kind', '')}/{ref.get('name', '')}"
            if first_controller:
                causes.append(
                    field_invalid(
                        field,
                        refs,
                        "Only one reference can have Controller set to true. "
                        f'Found "true" in references for {first_controller} and {current}',
                    )
                )
            else:
                first_controller = current
    return causes


def validate_object_meta(
    meta: Mapping[str, Any] | None,
    *,
    namespaced: bool,
    name_validator: NameValidator = name_is_dns_subdomain,
    field: str = "metadata",
) -> list[Cause]:
    """Upstream ``ValidateObjectMetaAccessor`` for a create (not the update rules).

    Cluster-scoped kinds must not carry a namespace (``Forbidden: not allowed on
    this type``); the server normally clears it before validating, as upstream
    does, so this only fires when it did not.
    """
    meta = meta or {}
    causes: list[Cause] = []
    generate = meta.get("generateName") or ""
    if generate:
        causes.extend(
            field_invalid(f"{field}.generateName", generate, m)
            for m in name_validator(generate, True)
        )
    name = meta.get("name") or ""
    if not name:
        causes.append(field_required(f"{field}.name", "name or generateName is required"))
    else:
        causes.extend(field_invalid(f"{field}.name", name, m) for m in name_validator(name, False))
    namespace = meta.get("namespace") or ""
    if namespaced:
        if not namespace:
            causes.append(field_required(f"{field}.namespace"))
        else:
            causes.extend(
                field_invalid(f"{field}.namespace", namespace, m)
                for m in name_is_dns_label(namespace, False)
            )
    elif namespace:
        causes.append(field_forbidden(f"{field}.namespace", "not allowed on this type"))
    generation = meta.get("generation")
    if isinstance(generation, int) and generation < 0:
        causes.append(
            field_invalid(f"{field}.generation", generation, "must be greater than or equal to 0")
        )
    causes.extend(validate_labels(meta.get("labels"), f"{field}.labels"))
    causes.extend(validate_annotations(meta.get("annotations"), f"{field}.annotations"))
    causes.extend(
        _validate_owner_references(meta.get("ownerReferences") or [], f"{field}.ownerReferences")
    )
    causes.extend(_validate_finalizers(meta.get("finalizers") or [], f"{field}.finalizers"))
    return causes


def _validate_finalizers(finalizers: list[str], field: str) -> list[Cause]:
    # Upstream reports every finalizer problem on the list's path, without an index.
    causes = [field_invalid(field, f, m) for f in finalizers for m in is_qualified_name(f)]
    if "orphan" in finalizers and "foregroundDeletion" in finalizers:
        causes.append(
            field_invalid(
                field, finalizers, "finalizer orphan and foregroundDeletion cannot be both set"
            )
        )
    return causes


# --- generateName ---------------------------------------------------------------

_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"  # no vowels: no accidental words
_RANDOM_LENGTH = 5
MAX_GENERATED_NAME_BASE = 63 - _RANDOM_LENGTH


def generate_name(prefix: str, *, rng: random.Random | None = None) -> str:
    """Upstream ``SimpleNameGenerator``: base cut to 58 chars + 5 random chars."""
    r = rng or random
    base = prefix[:MAX_GENERATED_NAME_BASE]
    return base + "".join(r.choice(_ALPHANUMS) for _ in range(_RANDOM_LENGTH))
