"""Kubernetes ``Status`` errors: one tree, keyed by ``Status.reason``.

The API server raises these and renders them; the client parses a ``Status``
body back into the same classes. The wire form is apimachinery's exactly:
compact JSON with the fields in Go struct order, ending in a newline, because
clients print the body verbatim (``Error from server (Conflict): ...``)::

    {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
     "message":"...","reason":"...","details":{...},"code":409}

Tree::

    StatusError                      (any Failure Status; .code, .reason)
    ├── BadRequest          400  BadRequest
    ├── Unauthorized        401  Unauthorized
    ├── Forbidden           403  Forbidden
    ├── NotFound            404  NotFound
    ├── MethodNotAllowed    405  MethodNotAllowed
    ├── NotAcceptable       406  NotAcceptable
    ├── AlreadyExists       409  AlreadyExists
    ├── Conflict            409  Conflict
    ├── Expired             410  Expired     (watch/list from a compacted revision)
    ├── Gone                410  Gone
    ├── RequestEntityTooLarge 413 RequestEntityTooLarge
    ├── UnsupportedMediaType 415 UnsupportedMediaType
    ├── Invalid             422  Invalid     (with field causes)
    ├── TooManyRequests     429  TooManyRequests
    ├── InternalError       500  InternalError
    ├── ServiceUnavailable  503  ServiceUnavailable
    └── Timeout             504  Timeout
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import orjson

__all__ = [
    "Cause",
    "StatusError",
    "BadRequest",
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "MethodNotAllowed",
    "NotAcceptable",
    "AlreadyExists",
    "Conflict",
    "Expired",
    "Gone",
    "RequestEntityTooLarge",
    "UnsupportedMediaType",
    "Invalid",
    "TooManyRequests",
    "InternalError",
    "ServiceUnavailable",
    "Timeout",
    "qualified_resource",
    "status_from_dict",
    "success_status",
]


@dataclass(frozen=True, slots=True)
class Cause:
    """One ``details.causes`` entry: a field and what is wrong with it."""

    reason: str  # e.g. FieldValueRequired, FieldValueInvalid, FieldValueNotSupported
    message: str
    field: str = ""

    def to_dict(self) -> dict[str, str]:
        out = {"reason": self.reason, "message": self.message} if self.reason else {"message": self.message}  # Go: omitempty
        if self.field:
            out["field"] = self.field
        return out


def qualified_resource(resource: str, group: str = "") -> str:
    """``pods`` or ``deployments.apps``: how upstream names a resource in messages."""
    return f"{resource}.{group}" if group else resource


class StatusError(Exception):
    """A failure ``Status``. Subclasses fix ``code`` and ``reason``."""

    code: ClassVar[int] = 500
    reason: ClassVar[str] = ""

    def __init__(
        self,
        message: str,
        *,
        name: str = "",
        group: str = "",
        kind: str = "",
        uid: str = "",
        causes: list[Cause] | tuple[Cause, ...] = (),
        retry_after_seconds: int = 0,
        code: int | None = None,
        reason: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.name = name
        self.group = group
        self.kind = kind
        self.uid = uid
        self.causes = tuple(causes)
        self.retry_after_seconds = retry_after_seconds
        if code is not None:
            self.code = code  # type: ignore[misc]
        if reason is not None:
            self.reason = reason  # type: ignore[misc]

    def details(self) -> dict[str, Any] | None:
        """``details`` in Go field order; None when there is nothing to say."""
        d: dict[str, Any] = {}
        if self.name:
            d["name"] = self.name
        if self.group:
            d["group"] = self.group
        if self.kind:
            d["kind"] = self.kind
        if self.uid:
            d["uid"] = self.uid
        if self.causes:
            d["causes"] = [c.to_dict() for c in self.causes]
        if self.retry_after_seconds:
            d["retryAfterSeconds"] = self.retry_after_seconds
        return d or None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:
            out["reason"] = self.reason
        details = self.details()
        if details is not None:
            out["details"] = details
        out["code"] = self.code
        return out

    def to_bytes(self) -> bytes:
        """Compact JSON, newline-terminated, as apimachinery writes it."""
        return orjson.dumps(self.to_dict()) + b"\n"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code}, {self.message!r})"


class BadRequest(StatusError):
    code = 400
    reason = "BadRequest"


class Unauthorized(StatusError):
    code = 401
    reason = "Unauthorized"


class Forbidden(StatusError):
    code = 403
    reason = "Forbidden"


class NotFound(StatusError):
    code = 404
    reason = "NotFound"

    @classmethod
    def for_object(cls, resource: str, name: str, group: str = "") -> NotFound:
        return cls(
            f'{qualified_resource(resource, group)} "{name}" not found',
            name=name,
            group=group,
            kind=resource,
        )


class MethodNotAllowed(StatusError):
    code = 405
    reason = "MethodNotAllowed"


class NotAcceptable(StatusError):
    code = 406
    reason = "NotAcceptable"


class AlreadyExists(StatusError):
    code = 409
    reason = "AlreadyExists"

    @classmethod
    def for_object(cls, resource: str, name: str, group: str = "") -> AlreadyExists:
        return cls(
            f'{qualified_resource(resource, group)} "{name}" already exists',
            name=name,
            group=group,
            kind=resource,
        )


class Conflict(StatusError):
    code = 409
    reason = "Conflict"

    @classmethod
    def for_object(
        cls, resource: str, name: str, why: str, group: str = ""
    ) -> Conflict:
        return cls(
            f'Operation cannot be fulfilled on {qualified_resource(resource, group)} "{name}": {why}',
            name=name,
            group=group,
            kind=resource,
        )

    @classmethod
    def modified(cls, resource: str, name: str, group: str = "") -> Conflict:
        return cls.for_object(
            resource,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
            group,
        )


class Expired(StatusError):
    code = 410
    reason = "Expired"

    @classmethod
    def too_old(cls, requested: int, oldest: int) -> Expired:
        return cls(f"too old resource version: {requested} ({oldest})")


class Gone(StatusError):
    code = 410
    reason = "Gone"


class RequestEntityTooLarge(StatusError):
    code = 413
    reason = "RequestEntityTooLarge"


class UnsupportedMediaType(StatusError):
    code = 415
    reason = "UnsupportedMediaType"


class Invalid(StatusError):
    code = 422
    reason = "Invalid"

    @classmethod
    def for_object(
        cls, kind: str, name: str, causes: list[Cause], group: str = ""
    ) -> Invalid:
        """``Pod "x" is invalid: spec.containers: Required value`` (upstream NewInvalid)."""
        qualified_kind = f"{kind}.{group}" if group else kind
        # the message lists each distinct error once (ErrorList.ToAggregate); the causes keep them all
        parts = list(dict.fromkeys(f"{c.field}: {c.message}" if c.field else c.message for c in causes))
        if len(parts) == 1:
            summary = parts[0]
        else:
            summary = "[" + ", ".join(parts) + "]"
        return cls(
            f'{qualified_kind} "{name}" is invalid: {summary}',
            name=name,
            group=group,
            kind=kind,
            causes=causes,
        )


class TooManyRequests(StatusError):
    code = 429
    reason = "TooManyRequests"


class InternalError(StatusError):
    code = 500
    reason = "InternalError"


class ServiceUnavailable(StatusError):
    code = 503
    reason = "ServiceUnavailable"


class Timeout(StatusError):
    code = 504
    reason = "Timeout"


_BY_REASON: dict[str, type[StatusError]] = {
    cls.reason: cls
    for cls in (
        BadRequest,
        Unauthorized,
        Forbidden,
        NotFound,
        MethodNotAllowed,
        NotAcceptable,
        AlreadyExists,
        Conflict,
        Expired,
        Gone,
        RequestEntityTooLarge,
        UnsupportedMediaType,
        Invalid,
        TooManyRequests,
        InternalError,
        ServiceUnavailable,
        Timeout,
    )
}


def status_from_dict(status: dict[str, Any], http_code: int = 0) -> StatusError:
    """Parse a ``Status`` body (client side) into the matching error class."""
    reason = status.get("reason") or ""
    code = int(status.get("code") or http_code or 500)
    details = status.get("details") or {}
    causes = [
        Cause(c.get("reason", ""), c.get("message", ""), c.get("field", ""))
        for c in details.get("causes") or ()
    ]
    cls = _BY_REASON.get(reason, StatusError)
    return cls(
        status.get("message") or reason or f"HTTP {code}",
        name=details.get("name", ""),
        group=details.get("group", ""),
        kind=details.get("kind", ""),
        uid=details.get("uid", ""),
        causes=causes,
        retry_after_seconds=int(details.get("retryAfterSeconds") or 0),
        code=code,
        reason=reason or None,
    )


def success_status(
    *, name: str = "", group: str = "", kind: str = "", uid: str = ""
) -> dict[str, Any]:
    """The ``Status`` a delete returns when it does not return the object."""
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    if kind:
        details["kind"] = kind
    if uid:
        details["uid"] = uid
    out: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
    }
    if details:
        out["details"] = details
    return out
