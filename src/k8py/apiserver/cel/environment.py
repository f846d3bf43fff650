"""The CEL environment Kubernetes expressions compile in, and the program cache.

One environment per set of declared variables (``self``/``oldSelf`` for CRD
rules; ``object``, ``oldObject``, ``request``, ``params``, ... for admission),
holding Kubernetes' base libraries:

* cel-cpp's standard library and its ``strings`` (charAt, indexOf, join,
  lowerAscii, replace, split, substring, trim, upperAscii, reverse, quote,
  format), ``optional`` (``?.``, ``[?k]``, ``orValue``, ``hasValue``) and
  ``bindings`` (``cel.bind``) extensions;
* the Kubernetes libraries written here: :mod:`~k8py.apiserver.cel.lists`
  (and ``sets.*``), :mod:`~k8py.apiserver.cel.regex`,
  :mod:`~k8py.apiserver.cel.urls`, :mod:`~k8py.apiserver.cel.ip` (IP and CIDR),
  :mod:`~k8py.apiserver.cel.quantity` and :mod:`~k8py.apiserver.cel.formats`.

Compiling costs ~150 µs and evaluating ~10 µs, so programs are compiled once:
:func:`compile_program` is cached by (expression, variables). Environments and
programs are immutable and safe to share between requests.

Also the authorizer library (:mod:`~k8py.apiserver.cel.authorizer`) for
admission expressions. Not here: ``orValue`` on the format library's
optionals (see ``formats``), ``string(<CIDR>)`` (see ``ip``), semver (1.33)
and two-variable comprehensions (1.32 stored expressions only). Cross-type numeric
orderings (``1 < 1.5``, allowed by Kubernetes' environment) are not declared
in cel-cpp's checker: an expression whose only type errors are those compiles
unchecked (:func:`compile_program`), and cel-cpp's runtime compares across
numeric types. cel-cpp also stops an evaluation after 10,000 comprehension
iterations in total (``Iteration budget exceeded``), where upstream has only
the cost limit: a rule walking more than 10,000 elements fails here.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings

from k8py.apiserver.cel import authorizer, formats, ip, lists, mutation, quantity, regex, types, urls
from k8py.apiserver.cel.errors import CompileError, cel_go_message

__all__ = ["Variables", "check", "typed_environment", "compile_program", "environment", "variable_types", "only_cross_numeric"]

Variables = Mapping[str, str] | Iterable[str]
"""Declared variables: names (all ``dyn``) or name -> type (``dyn``, ``string``,
``int``, ``uint``, ``double``, ``bool``, ``bytes``, ``list``, ``map``,
``timestamp``, ``duration``, and the authorizer library's ``authorizer`` and
``resourceCheck``)."""

_TYPES = {
    "dyn": cel.Type.DYN, "string": cel.Type.STRING, "int": cel.Type.INT, "uint": cel.Type.UINT,
    "double": cel.Type.DOUBLE, "bool": cel.Type.BOOL, "bytes": cel.Type.BYTES,
    "list": cel.Type.List(cel.Type.DYN), "map": cel.Type.Map(cel.Type.STRING, cel.Type.DYN),
    "timestamp": cel.Type.TIMESTAMP, "duration": cel.Type.DURATION,
    "authorizer": cel.Type(authorizer.AUTHORIZER_TYPE), "resourceCheck": cel.Type(authorizer.RESOURCE_CHECK_TYPE),
}


def variable_types(variables: Variables) -> tuple[tuple[str, str], ...]:
    """The canonical, hashable form of a variables declaration."""
    if isinstance(variables, Mapping):
        pairs = tuple(sorted((str(k), str(v)) for k, v in variables.items()))
    elif isinstance(variables, str):
        pairs = ((variables, "dyn"),)
    else:
        pairs = tuple(sorted((str(name), "dyn") for name in variables))
    for name, type_name in pairs:
        if type_name not in _TYPES:
            raise ValueError(f"variable {name!r}: unknown CEL type {type_name!r} (one of {', '.join(_TYPES)})")
    return pairs


def _extensions() -> list[Any]:
    return [
        ext_strings.ExtStrings(), ext_optional.ExtOptional(), ext_bindings.ExtBindings(),
        lists.extension(), regex.extension(), urls.extension(), ip.extension(), quantity.extension(),
        formats.extension(), authorizer.extension(), mutation.extension(),
    ]


@functools.lru_cache(maxsize=64)
def environment(variables: tuple[tuple[str, str], ...]) -> Any:
    """The cel-cpp environment with ``variables`` declared (cached)."""
    return cel.NewEnv(types.POOL, variables={name: _TYPES[type_name] for name, type_name in variables},
                      extensions=_extensions())


@functools.lru_cache(maxsize=4096)
def compile_program(expression: str, variables: tuple[tuple[str, str], ...]) -> Any:
    """The checked cel-cpp ``Expression`` (cached); :class:`CompileError` with cel-go's text.

    An expression whose only type errors are cross-type numeric orderings
    (``1 < 1.5``, which Kubernetes' environment allows and cel-cpp's checker
    does not declare) is compiled unchecked: cel-cpp's runtime compares
    across numeric types, and its result type reads ``dyn``.
    """
    env = environment(variables)
    try:
        return env.compile(expression)
    except RuntimeError as exc:
        message = cel_go_message(str(exc))
        if not only_cross_numeric(message):
            raise CompileError(message) from None
    return env.compile(expression, disable_check=True)


def typed_environment(pool: Any, variables: Mapping[str, Any]) -> Any:
    """An environment whose variables have ``cel.Type`` values from ``pool``
    (a schema's types, :mod:`~k8py.apiserver.cel.schema_types`); not cached:
    build one per schema node and reuse it for that node's expressions."""
    return cel.NewEnv(pool, variables=dict(variables), extensions=_extensions())


def check(env: Any, expression: str) -> str:
    """Type-check ``expression`` in ``env``: the result type's name (``bool``,
    ``string``, ``int``, ``dyn``, ...; "" when only cross-type numeric
    orderings failed, so the type is not known), or :class:`CompileError`
    with cel-go's text."""
    try:
        return str(env.compile(expression).return_type().name()).lower()
    except RuntimeError as exc:
        message = cel_go_message(str(exc))
        if not only_cross_numeric(message):
            raise CompileError(message) from None
    return ""


_NUMERIC = ("int", "uint", "double")
_ORDERING = re.compile(r"^ERROR: <input>:\d+:\d+: found no matching overload for '_(?:<|<=|>|>=)_' applied to "
                       r"'\((\w+), (\w+)\)'$")


def only_cross_numeric(message: str) -> bool:
    """Whether every error in ``message`` is an ordering of two numeric types
    (or follows from one: an operand typed ``*error*``)."""
    errors = [line for line in message.split("\n") if line.startswith("ERROR: ") and "'*error*'" not in line
              and "*error*," not in line and ", *error*" not in line]
    if not errors:
        return False
    for line in errors:
        match = _ORDERING.match(line)
        if not match or match.group(1) not in _NUMERIC or match.group(2) not in _NUMERIC:
            return False
    return True
