"""How patch failures become ``Status`` errors, the way the apiserver maps them.

Upstream maps patch-engine errors in three ways, and so do we:

* malformed patch documents (bad JSON, a directive in the wrong shape) are
  ``400 BadRequest`` carrying the engine's message;
* patches that are well-formed but cannot be applied (a JSON-patch ``test``
  that fails, a missing path, ``lists of lists``) are ``422 Invalid`` built by
  ``NewGenericServerResponse``, whose message is the fixed
  ``the server rejected our request due to an error in our request`` — that is
  what clients print, with the engine's message as the one
  ``UnexpectedServerResponse`` cause (as ``NewGenericServerResponse`` does);
* anything else the engine reports (a list item without its merge key, an
  unknown ``$patch`` value) reaches the handler as a plain Go error and is
  rendered as ``500 InternalError`` ``Internal error occurred: <message>``.
  That is odd for a client mistake, but it is upstream's wire behaviour.
"""

from __future__ import annotations

from typing import Any

from k8py.api.errors import BadRequest, Cause, InternalError, Invalid
from k8py.api.patch.json_values import go_format, json_kind

__all__ = [
    "GENERIC_UNPROCESSABLE",
    "bad_request",
    "unprocessable",
    "internal",
    "bad_arg_type",
    "no_merge_key",
]

GENERIC_UNPROCESSABLE = "the server rejected our request due to an error in our request"


def bad_request(message: str) -> BadRequest:
    return BadRequest(message)


def unprocessable(detail: str) -> Invalid:
    """422 with upstream's generic message; the precise reason is the cause."""
    return Invalid(GENERIC_UNPROCESSABLE, causes=[Cause("UnexpectedServerResponse", detail)])


def internal(detail: str) -> InternalError:
    return InternalError(
        f"Internal error occurred: {detail}", causes=[Cause("", detail)]
    )


_GO_TYPES = {
    "map": "map[string]interface {}",
    "list": "[]interface {}",
    "string": "string",
    "number": "float64",
    "bool": "bool",
    "null": "<nil>",
}


def bad_arg_type(expected: str, value: Any) -> InternalError:
    """mergepatch.ErrBadArgType: ``expected a map[string]interface {}, but received a string``."""
    return internal(
        f"expected a {_GO_TYPES[expected]}, but received a {_GO_TYPES[json_kind(value)]}"
    )


def no_merge_key(item: dict[str, Any], merge_key: str) -> InternalError:
    """mergepatch.ErrNoMergeKey."""
    return internal(f"map: {go_format(item)} does not contain declared merge key: {merge_key}")
