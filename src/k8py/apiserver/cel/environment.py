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

Not here: ``format.named()`` and ``orValue`` on a format's result (optionals,
which a Python function cannot return to cel-cpp; see ``formats``),
``authorizer``, semver, two-variable comprehensions and cross-type
numeric comparisons at check time (``1 < 1.5``; ``dyn`` values compare across
types at run time). cel-cpp also stops an evaluation after 10,000 comprehension
iterations in total (``Iteration budget exceeded``), where upstream has only
the cost limit: a rule walking more than 10,000 elements fails here.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings

from k8py.apiserver.cel import formats, ip, lists, quantity, regex, types, urls
from k8py.apiserver.cel.errors import CompileError, cel_go_message

__all__ = ["Variables", "compile_program", "environment", "variable_types"]

Variables = Mapping[str, str] | Iterable[str]
"""Declared variables: names (all ``dyn``) or name -> type (``dyn``, ``string``,
``int``, ``uint``, ``double``, ``bool``, ``bytes``, ``list``, ``map``,
``timestamp``, ``duration``)."""

_TYPES = {
    "dyn": cel.Type.DYN, "string": cel.Type.STRING, "int": cel.Type.INT, "uint": cel.Type.UINT,
    "double": cel.Type.DOUBLE, "bool": cel.Type.BOOL, "bytes": cel.Type.BYTES,
    "list": cel.Type.List(cel.Type.DYN), "map": cel.Type.Map(cel.Type.STRING, cel.Type.DYN),
    "timestamp": cel.Type.TIMESTAMP, "duration": cel.Type.DURATION,
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


@functools.lru_cache(maxsize=64)
def environment(variables: tuple[tuple[str, str], ...]) -> Any:
    """The cel-cpp environment with ``variables`` declared (cached)."""
    return cel.NewEnv(
        types.POOL,
        variables={name: _TYPES[type_name] for name, type_name in variables},
        extensions=[
            ext_strings.ExtStrings(), ext_optional.ExtOptional(), ext_bindings.ExtBindings(),
            lists.extension(), regex.extension(), urls.extension(), ip.extension(), quantity.extension(),
            formats.extension(),
        ],
    )


@functools.lru_cache(maxsize=4096)
def compile_program(expression: str, variables: tuple[tuple[str, str], ...]) -> Any:
    """The checked cel-cpp ``Expression`` (cached); :class:`CompileError` with cel-go's text."""
    try:
        return environment(variables).compile(expression)
    except RuntimeError as exc:
        raise CompileError(cel_go_message(str(exc))) from None
