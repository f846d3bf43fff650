"""The Lease candidates compete for, and its election record (client-go ``resourcelock``).

client-go keeps the lock (``resourcelock.LeaseLock``, ``LeaderElectionRecord``)
apart from the algorithm that uses it (``leaderelection.LeaderElector``); so
does k8py: :mod:`k8py.client.leader_election` runs the election and re-exports
the names here.

Invariants:

- :class:`LeaseLock` keeps the Lease last read or written; its
  ``resourceVersion`` guards the next :meth:`LeaseLock.update`, so a
  concurrent writer makes that update fail with 409 Conflict, never overwrite.
- :class:`LeaderElectionRecord` is immutable; it maps one-to-one onto a
  Lease's ``spec`` (``from_spec``/``to_spec`` round-trip).
- Timestamps are MicroTime strings (``2026-11-30T08:00:00.000000Z``),
  written by :func:`micro_time` and read by :func:`parse_micro_time`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from k8py.client.resources import LEASES
from k8py.client.rest import RestClient

__all__ = ["LeaseLock", "LeaderElectionRecord", "micro_time", "parse_micro_time"]


def micro_time(when: datetime) -> str:
    """A MicroTime string: ``2026-11-30T08:00:00.000000Z``."""
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_micro_time(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@dataclass(frozen=True, slots=True)
class LeaderElectionRecord:
    """The election state a Lease's spec carries (client-go ``LeaderElectionRecord``)."""

    holder_identity: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str | None = None
    renew_time: str | None = None
    leader_transitions: int = 0

    @classmethod
    def from_spec(cls, spec: dict[str, Any] | None) -> LeaderElectionRecord:
        spec = spec or {}
        return cls(
            holder_identity=spec.get("holderIdentity") or "",
            lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=spec.get("acquireTime"),
            renew_time=spec.get("renewTime"),
            leader_transitions=int(spec.get("leaseTransitions") or 0),
        )

    def to_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "holderIdentity": self.holder_identity,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "leaseTransitions": self.leader_transitions,
        }
        if self.acquire_time:
            spec["acquireTime"] = self.acquire_time
        if self.renew_time:
            spec["renewTime"] = self.renew_time
        return spec


class LeaseLock:
    """The Lease a set of candidates compete for (client-go ``resourcelock.LeaseLock``).

    Keeps the Lease last read or written, whose ``resourceVersion`` guards the
    next :meth:`update`. ``update`` before ``get``/``create`` is an error.
    """

    def __init__(self, client: RestClient, namespace: str, name: str, *, identity: str, event_recorder: Any = None) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.event_recorder = event_recorder
        self.lease: dict[str, Any] | None = None

    def describe(self) -> str:
        return f"{self.namespace}/{self.name}"

    async def get(self) -> LeaderElectionRecord:
        """Read the Lease; raises :class:`~k8py.api.errors.NotFound` if it does not exist."""
        self.lease = await self.client.get(LEASES, self.namespace, self.name)
        return LeaderElectionRecord.from_spec(self.lease.get("spec"))

    async def create(self, record: LeaderElectionRecord) -> None:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": record.to_spec(),
        }
        self.lease = await self.client.create(LEASES, body, namespace=self.namespace)

    async def update(self, record: LeaderElectionRecord) -> None:
        """PUT the record with the last seen resourceVersion (409 if someone wrote since)."""
        if self.lease is None:
            raise RuntimeError("lease not initialized, call get or create first")
        self.lease = await self.client.update(LEASES, {**self.lease, "spec": record.to_spec()})

    def record_event(self, message: str) -> None:
        if self.event_recorder is None or self.lease is None:
            return
        subject = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": self.lease.get("metadata") or {}}
        self.event_recorder.eventf(subject, "Normal", "LeaderElection", "%s %s", self.identity, message)
