"""Decoding watch responses: per event or a read at a time, the same events and errors."""

from __future__ import annotations

from typing import AsyncIterator

import orjson
import pytest
from hypothesis import given, settings, strategies as st

from k8py.api.errors import Expired, NotFound
from k8py.client.watch_stream import ADDED, BOOKMARK, DELETED, MODIFIED, WatchEvent, WatchStream


class _Response:
    """An HTTP response whose body arrives in the given reads."""

    status = 200
    headers: dict[str, str] = {}

    def __init__(self, reads: list[bytes]) -> None:
        self._reads = reads
        self.closed = False

    async def read(self) -> bytes:
        return b"".join(self._reads)

    async def chunks(self) -> AsyncIterator[bytes]:
        for data in self._reads:
            yield data

    def close(self) -> None:
        self.closed = True


def _stream(reads: list[bytes]) -> tuple[WatchStream, _Response]:
    response = _Response(reads)

    async def open_stream() -> _Response:
        return response

    return WatchStream(open_stream), response


def _line(type_: str, name: str, rv: str) -> bytes:
    return orjson.dumps({"type": type_, "object": {"kind": "Pod", "metadata": {"name": name, "resourceVersion": rv}}}) + b"\n"


_EVENTS = [_line(t, f"p{i}", str(i + 1)) for i, t in enumerate([ADDED, MODIFIED, ADDED, BOOKMARK, DELETED, MODIFIED])]
_BODY = b"".join(_EVENTS)


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in zip(points, points[1:])]


@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=len(_BODY)), max_size=12))
async def test_batches_and_single_events_agree_on_any_chunking(cuts: list[int]) -> None:
    reads = _cut(_BODY, cuts)
    single, _ = _stream(reads)
    one_by_one = [event async for event in single]
    batched, response = _stream(reads)
    batches = [batch async for batch in batched.batches()]
    assert all(batches), "a batch is never empty"
    assert [e for batch in batches for e in batch] == one_by_one
    assert [(e.type, e.object["metadata"]["name"]) for e in one_by_one] == [
        (ADDED, "p0"), (MODIFIED, "p1"), (ADDED, "p2"), (BOOKMARK, "p3"), (DELETED, "p4"), (MODIFIED, "p5")]
    assert response.closed


async def test_one_read_is_one_batch() -> None:
    stream, _ = _stream([_BODY[: len(_EVENTS[0]) + 3], _BODY[len(_EVENTS[0]) + 3:]])
    sizes = [len(batch) async for batch in stream.batches()]
    assert sizes == [1, 5]


async def test_an_error_event_raises_after_the_events_before_it_in_its_read() -> None:
    expired = orjson.dumps({"type": "ERROR", "object": {"kind": "Status", "status": "Failure", "code": 410,
                                                         "reason": "Expired", "message": "too old resource version"}}) + b"\n"
    stream, response = _stream([_EVENTS[0] + _EVENTS[1] + expired + _EVENTS[2]])
    got: list[WatchEvent] = []
    with pytest.raises(Expired):
        async for batch in stream.batches():
            got.extend(batch)
    assert [e.object["metadata"]["name"] for e in got] == ["p0", "p1"]
    assert response.closed


async def test_a_status_line_raises_its_error() -> None:
    not_found = orjson.dumps({"kind": "Status", "status": "Failure", "code": 404, "reason": "NotFound", "message": "gone"})
    stream, _ = _stream([not_found + b"\n"])
    with pytest.raises(NotFound):
        [event async for event in stream]


def test_a_watch_event_is_an_immutable_pair_with_its_resource_version() -> None:
    event = WatchEvent(ADDED, {"metadata": {"resourceVersion": "7"}})
    kind, obj = event
    assert (kind, obj["metadata"]["resourceVersion"], event.resource_version) == (ADDED, "7", "7")
    assert WatchEvent(BOOKMARK, {}).resource_version == ""
    with pytest.raises(AttributeError):
        event.type = DELETED  # type: ignore[misc]
