"""How the contract's key space is laid out in etcd.

Contract keys are paths under ``/registry`` (``/registry/pods/default/web``),
exactly as kube-apiserver lays them out with its default ``--etcd-prefix``.
An :class:`EtcdKeySpace` with prefix ``P`` maps a contract key by replacing
that leading ``/registry`` with ``P``::

    prefix "/registry"            /registry/pods/default/web -> /registry/pods/default/web
    prefix "/blue/registry"       /registry/pods/default/web -> /blue/registry/pods/default/web

so the default prefix stores keys where kube-apiserver would, and several
clusters share one etcd by each taking its own prefix. The mapping is a
bijection between contract keys that start with ``/registry`` and etcd keys
that start with ``P``. Consequences:

- a *key* outside ``/registry`` is rejected (ValueError);
- a list/watch *prefix* that is itself a prefix of ``/registry`` (``""``,
  ``"/"``) means "every key of this store"; any other prefix outside
  ``/registry`` matches nothing;
- two clusters must not use prefixes where one is a string prefix of the
  other (``/a`` and ``/ab``): listing all of ``/a`` would see ``/ab``'s keys.
  Use ``/<cluster>/registry``.

One etcd key outside that mapping belongs to the store: the **progress
fence** ``P0`` (``/registry0`` for the default prefix). ``P0`` is the first
key after every key under ``P/``, so a watch of the whole ``/registry/``
space widens its range end by one key to take it in (``watch_range``), and
no contract list of ``/registry/...`` ever sees it. ``EtcdStorage`` writes it
to learn that a watch has delivered everything up to a revision (see
``EtcdStorage.request_progress``); the prefix rule above keeps it private
(another cluster's ``P0...`` prefix would have ``P`` as a string prefix).

Everything here is pure (no I/O) and works on ``bytes`` etcd keys.
"""

from __future__ import annotations

__all__ = ["ROOT", "EtcdKeySpace", "prefix_end"]

ROOT = "/registry"


def prefix_end(key: bytes) -> bytes:
    """The smallest key greater than every key starting with ``key``
    (etcd's ``range_end`` for a prefix); ``b"\\0"`` means "to the end"."""
    trimmed = key.rstrip(b"\xff")
    if not trimmed:
        return b"\0"
    return trimmed[:-1] + bytes([trimmed[-1] + 1])


class EtcdKeySpace:
    def __init__(self, prefix: str = ROOT) -> None:
        if not prefix.startswith("/") or prefix.endswith("/"):
            raise ValueError(f"etcd prefix must start and not end with '/': {prefix!r}")
        self.prefix = prefix
        self._prefix_bytes = prefix.encode()

    def to_etcd(self, key: str) -> bytes:
        if not key.startswith(ROOT):
            raise ValueError(f"key outside the {ROOT} key space: {key!r}")
        return self._prefix_bytes + key[len(ROOT) :].encode()

    def from_etcd(self, key: bytes) -> str:
        return ROOT + key[len(self._prefix_bytes) :].decode()

    @property
    def fence(self) -> bytes:
        """The progress fence key ``P0`` (see the module docstring)."""
        return self._prefix_bytes + b"0"

    def watch_range(self, prefix: str) -> tuple[bytes, bytes] | None:
        """``prefix_range``, widened to end just after the fence key when the
        range would end right before it (a watch of all of ``/registry/``),
        so that the watch sees the fence. Ranges that already hold the fence
        (prefix ``""`` or ``"/"``) or cannot hold it are returned as they are."""
        rng = self.prefix_range(prefix)
        if rng is not None and rng[1] == self.fence:
            return rng[0], self.fence + b"\0"
        return rng

    def covers_fence(self, start: bytes, end: bytes) -> bool:
        return start <= self.fence and (end == b"\0" or self.fence < end)

    def prefix_range(self, prefix: str) -> tuple[bytes, bytes] | None:
        """``(key, range_end)`` covering contract keys under ``prefix``, or
        None when no contract key can start with ``prefix``."""
        if ROOT.startswith(prefix):
            start = self._prefix_bytes
        elif prefix.startswith(ROOT):
            start = self.to_etcd(prefix)
        else:
            return None
        return start, prefix_end(start)

    def range_after(self, prefix: str, start_after: str) -> tuple[bytes, bytes] | None:
        """The range of keys under ``prefix`` strictly after ``start_after``."""
        rng = self.prefix_range(prefix)
        if rng is None:
            return None
        start, end = rng
        if start_after:
            if start_after.startswith(ROOT):
                start = max(start, self.to_etcd(start_after) + b"\0")
            elif start_after > ROOT:
                return None  # every contract key sorts before start_after
        if end != b"\0" and start >= end:
            return None
        return start, end
