"""Cutting a newline-delimited byte stream into lines, in linear time.

Watch responses (ours to clients, etcd's gateway to us) are streams of
``{json}\\n`` lines that arrive in arbitrary chunks: a chunk may hold many
lines, or a 15 MB object may arrive in hundreds of 64 KB chunks. Joining the
unfinished line to every new chunk (``pending + chunk``) copies the line
again per chunk, quadratic in the size of a large object; and
``StreamReader.readline`` has a line-size limit a large object exceeds.

:class:`LineSplitter` keeps the pieces of an unfinished line in a list and
joins them once, when the newline arrives, and searches each byte for a
newline exactly once: every byte is copied a bounded number of times.
Blank (whitespace-only) lines are dropped (some servers send them as
keep-alives). It is the one splitter in k8py: the client's watch decoder and
the etcd storage's watch reader both use it.
"""

from __future__ import annotations

from typing import AsyncIterator

__all__ = ["LineSplitter", "iter_lines"]


class LineSplitter:
    """Feed chunks, get complete non-blank lines (without their ``\\n``)."""

    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts: list[bytes] = []  # pieces of the unfinished line, in order

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines this chunk completes; the rest is kept for the next chunk."""
        end = chunk.find(b"\n")
        if end < 0:
            if chunk:
                self._parts.append(chunk)
            return []
        if self._parts:
            self._parts.append(chunk[:end])
            first = b"".join(self._parts)
            self._parts = []
        else:
            first = chunk[:end]
        lines = [first] if first and not first.isspace() else []
        start = end + 1
        find = chunk.find
        while True:
            end = find(b"\n", start)
            if end < 0:
                break
            if end > start:
                line = chunk[start:end]
                if not line.isspace():
                    lines.append(line)
            start = end + 1
        if start < len(chunk):
            self._parts.append(chunk[start:])
        return lines

    def rest(self) -> bytes:
        """The unfinished line (what a stream that ends without a final newline left)."""
        return b"".join(self._parts)


async def iter_lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Complete non-blank lines from a chunk stream; a trailing partial line is dropped."""
    splitter = LineSplitter()
    async for chunk in chunks:
        for line in splitter.feed(chunk):
            yield line
