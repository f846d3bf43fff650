"""The one NDJSON line splitter: correct on any chunking, linear on large lines."""

from __future__ import annotations

import time

from hypothesis import given, strategies as st

from k8py.api.ndjson import LineSplitter, iter_lines


@given(
    lines=st.lists(st.binary(min_size=1, max_size=40).map(lambda b: b.replace(b"\n", b"x")), max_size=20),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=30),
)
def test_any_chunking_yields_the_same_non_blank_lines(lines, cuts):
    data = b"".join(line + b"\n" for line in lines) + b"partial"
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    splitter = LineSplitter()
    got = []
    for a, b in zip(points, points[1:]):
        got.extend(splitter.feed(data[a:b]))
    assert got == [line for line in lines if not line.isspace()]
    assert splitter.rest() == b"partial"


def test_blank_keep_alive_lines_are_dropped():
    assert LineSplitter().feed(b'\n  \n{"a":1}\n\n{"b":2}\n') == [b'{"a":1}', b'{"b":2}']


def test_a_large_line_in_small_chunks_costs_linear_time():
    # 16 MiB in 1 KiB chunks: re-joining the pending line per chunk copies ~137 GB
    # (minutes); the splitter copies each byte a bounded number of times (tens of ms).
    chunk = b"x" * 1024
    splitter = LineSplitter()
    started = time.perf_counter()
    for _ in range(16 * 1024):
        assert splitter.feed(chunk) == []
    (line,) = splitter.feed(b"\n")
    elapsed = time.perf_counter() - started
    assert len(line) == 16 * 1024 * 1024
    assert elapsed < 10.0, f"{elapsed:.1f}s: the splitter is not linear"


async def test_iter_lines_drops_a_trailing_partial_line():
    async def chunks():
        for c in (b'{"a"', b":1}\n{", b'"b":2}\n{"c"'):
            yield c

    assert [line async for line in iter_lines(chunks())] == [b'{"a":1}', b'{"b":2}']
