"""The REST client's small vocabulary: patch content types, the retry
policy, and how an error reply becomes a :class:`~k8py.api.errors.StatusError`.

A non-2xx reply whose body is a ``Status`` raises that Status's error class;
any other body is mapped by its HTTP code (upstream's ``newUnstructuredResponseError``),
keeping the first 500 characters of the body as the message.
"""

from __future__ import annotations

import enum
from typing import Mapping

import orjson

from k8py.api.errors import StatusError, status_from_dict

__all__ = ["PatchType", "RetryPolicy", "error_from_response", "retry_after"]

_REASON_BY_CODE = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 405: "MethodNotAllowed",
                   406: "NotAcceptable", 409: "Conflict", 410: "Gone", 413: "RequestEntityTooLarge",
                   415: "UnsupportedMediaType", 422: "Invalid", 429: "TooManyRequests", 500: "InternalError",
                   503: "ServiceUnavailable", 504: "Timeout"}


class PatchType(str, enum.Enum):
    JSON = "application/json-patch+json"
    MERGE = "application/merge-patch+json"
    STRATEGIC = "application/strategic-merge-patch+json"
    APPLY = "application/apply-patch+yaml"


class RetryPolicy:
    """How many tries and how to space them (see the module docstring)."""

    def __init__(self, *, max_attempts: int = 5, initial: float = 0.1, cap: float = 5.0) -> None:
        self.max_attempts = max(1, max_attempts)
        self.initial = initial
        self.cap = cap


def error_from_response(status: int, body: bytes) -> StatusError:
    try:
        parsed = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict) and parsed.get("kind") == "Status":
        return status_from_dict(parsed, status)
    reason = _REASON_BY_CODE.get(status, "")
    message = body.decode("utf-8", "replace").strip()[:500] or f"the server responded with HTTP {status}"
    return status_from_dict({"reason": reason, "code": status, "message": message}, status)


def retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None
