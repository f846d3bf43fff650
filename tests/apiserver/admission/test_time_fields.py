"""Timestamps are stored as Go writes them (``admission.time_fields``): Time as
``...:SSZ``, MicroTime as ``...:SS.ffffffZ``, whatever form a client sent."""

from __future__ import annotations

import pytest

from k8py.apiserver.admission.time_fields import needs_normalizing, normalize_times

LEASE = "io.k8s.api.coordination.v1.Lease"


def lease(renew: str, created: str = "2026-11-30T08:00:00Z") -> dict:
    return {"metadata": {"name": "n", "creationTimestamp": created},
            "spec": {"holderIdentity": "n", "renewTime": renew, "acquireTime": renew}}


@pytest.mark.parametrize("sent, stored", [
    ("2026-11-30T08:00:00.123456Z", "2026-11-30T08:00:00.123456Z"),  # already canonical: kept
    ("2026-11-30T08:00:00.5Z", "2026-11-30T08:00:00.500000Z"),
    ("2026-11-30T09:00:00.123456+01:00", "2026-11-30T08:00:00.123456Z"),
    ("2026-11-30T08:00:00+00:00", "2026-11-30T08:00:00.000000Z"),
    ("2026-11-30T08:00:00Z", "2026-11-30T08:00:00.000000Z"),
    ("not a time", "not a time"),  # left for validation to report
    ("2026-13-45T08:00:00.000000Z", "2026-13-45T08:00:00.000000Z"),
])
def test_micro_times_are_stored_with_six_fraction_digits_in_utc(sent, stored) -> None:
    obj = lease(sent)
    normalize_times(LEASE, obj)
    assert obj["spec"]["renewTime"] == obj["spec"]["acquireTime"] == stored


@pytest.mark.parametrize("sent, stored", [
    ("2026-11-30T08:00:00Z", "2026-11-30T08:00:00Z"),
    ("2026-11-30T08:00:00.999999Z", "2026-11-30T08:00:00Z"),  # a Time has no fraction
    ("2026-11-30T10:00:00+02:00", "2026-11-30T08:00:00Z"),
])
def test_times_are_stored_to_the_second_in_utc(sent, stored) -> None:
    obj = lease("2026-11-30T08:00:00.000000Z", created=sent)
    normalize_times(LEASE, obj)
    assert obj["metadata"]["creationTimestamp"] == stored


def test_a_body_is_looked_at_only_when_it_may_hold_a_time_to_rewrite() -> None:
    assert not needs_normalizing(b'{"spec":{"renewTime":"2026-11-30T08:00:00Z"}}')
    assert needs_normalizing(b'{"spec":{"renewTime":"2026-11-30T08:00:00+00:00"}}')
    assert needs_normalizing(b'{"spec":{"renewTime":"2026-11-30T08:00:00.000000Z"}}')  # a Time with a fraction may hide there
