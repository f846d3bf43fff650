"""The revisioned key-value store behind the API server (see ``interface``)."""

from k8py.storage.interface import (
    CompactedError,
    EventType,
    FutureRevisionError,
    KeyExistsError,
    KeyNotFoundError,
    KeyValue,
    ListResult,
    RevisionConflictError,
    Storage,
    StorageError,
    StorageUnavailableError,
    ValueTooLargeError,
    WatchBatch,
    WatchEvent,
    WatchLaggedError,
)

__all__ = [
    "CompactedError",
    "EventType",
    "FutureRevisionError",
    "KeyExistsError",
    "KeyNotFoundError",
    "KeyValue",
    "ListResult",
    "RevisionConflictError",
    "Storage",
    "StorageError",
    "StorageUnavailableError",
    "ValueTooLargeError",
    "WatchBatch",
    "WatchEvent",
    "WatchLaggedError",
]
