"""SPDY/3.1 framing, the part Kubernetes' streaming uses (no I/O).

Why it exists: ``kubectl port-forward`` (1.32) speaks SPDY/3.1 — tunnelled
inside a WebSocket (subprotocol ``SPDY/3.1+portforward.k8s.io``, the SPDY bytes
carried in binary messages), or over a plain ``Upgrade: SPDY/3.1`` connection
when the WebSocket upgrade fails. Each forwarded connection is a pair of
client-initiated streams (``streamtype: error`` and ``streamtype: data``) named
by ``port`` and ``requestid`` headers.

What this module gives: :class:`FrameReader` turns bytes into frames
(:class:`DataFrame`, :class:`ControlFrame`) and :class:`FrameWriter` turns
frames into bytes. Header blocks are zlib-compressed with the dictionary of
the SPDY/3 draft (section 2.6.10.1), one compression context per direction
for the whole connection: the reader and the writer each keep theirs, so one
reader and one writer serve one connection, in frame order.

What it leaves out, as the Go implementation kubectl uses (moby/spdystream)
does: flow control (WINDOW_UPDATE is parsed and ignored, never needed),
server push, SETTINGS beyond parsing.

Frame layout (all integers big-endian)::

    control: 1 | version(15) | type(16) | flags(8) | length(24) | payload
    data:    0 | stream id(31)          | flags(8) | length(24) | payload
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

__all__ = [
    "SYN_STREAM",
    "SYN_REPLY",
    "RST_STREAM",
    "SETTINGS",
    "PING",
    "GOAWAY",
    "HEADERS",
    "WINDOW_UPDATE",
    "FLAG_FIN",
    "FLAG_UNIDIRECTIONAL",
    "ControlFrame",
    "DataFrame",
    "FrameReader",
    "FrameWriter",
    "ProtocolError",
    "HEADER_DICTIONARY",
]

VERSION = 3

SYN_STREAM = 1
SYN_REPLY = 2
RST_STREAM = 3
SETTINGS = 4
PING = 6
GOAWAY = 7
HEADERS = 8
WINDOW_UPDATE = 9

FLAG_FIN = 0x01
FLAG_UNIDIRECTIONAL = 0x02

#: RST_STREAM status codes used here
RST_PROTOCOL_ERROR = 1
RST_REFUSED_STREAM = 3
RST_CANCEL = 5

#: a frame's payload length is 24 bits; kubectl never sends more than 32 KiB
MAX_FRAME = (1 << 24) - 1


def _dictionary() -> bytes:
    """The SPDY/3 header-compression dictionary: the header names and common
    values, each with a 4-byte length, then status lines, dates and media
    types run together (SPDY/3 draft, 2.6.10.1)."""
    words = (
        "options head post put delete trace accept accept-charset accept-encoding "
        "accept-language accept-ranges age allow authorization cache-control connection "
        "content-base content-encoding content-language content-length content-location "
        "content-md5 content-range content-type date etag expect expires from host if-match "
        "if-modified-since if-none-match if-range if-unmodified-since last-modified location "
        "max-forwards pragma proxy-authenticate proxy-authorization range referer retry-after "
        "server te trailer transfer-encoding upgrade user-agent vary via warning "
        "www-authenticate method get status"
    ).split()
    words += ["200 OK", "version", "HTTP/1.1", "url", "public", "set-cookie", "keep-alive", "origin"]
    prefixed = b"".join(struct.pack(">I", len(w)) + w.encode() for w in words)
    codes = "100 101 201 202 205 206 300 302 303 304 305 306 307 402 405 406 407 408 409 410 411 412 413 414 415 416 417 502 504 505".split()
    reasons = (
        "203 Non-Authoritative Information|204 No Content|301 Moved Permanently|400 Bad Request|"
        "401 Unauthorized|403 Forbidden|404 Not Found|500 Internal Server Error|501 Not Implemented|"
        "503 Service Unavailable"
    ).split("|")
    tail = (
        "".join(codes)
        + "".join(reasons)
        + "Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT"
        + "chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,"
        + "text/plain,text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8"
        + "charset=iso-8859-1,utf-,*,enq=0."
    )
    return prefixed + tail.encode()


HEADER_DICTIONARY = _dictionary()


class ProtocolError(Exception):
    """The peer sent bytes that are not SPDY/3: the connection must close."""


@dataclass(slots=True)
class DataFrame:
    stream_id: int
    data: bytes
    flags: int = 0

    @property
    def fin(self) -> bool:
        return bool(self.flags & FLAG_FIN)


@dataclass(slots=True)
class ControlFrame:
    """One control frame. Which fields mean something depends on ``type``:
    SYN_STREAM / SYN_REPLY / HEADERS carry ``stream_id`` and ``headers``;
    RST_STREAM ``stream_id`` and ``status``; PING ``ping_id``; GOAWAY
    ``stream_id`` (last good) and ``status``; WINDOW_UPDATE ``stream_id`` and
    ``delta``; SETTINGS ``settings``."""

    type: int
    flags: int = 0
    stream_id: int = 0
    associated_id: int = 0
    priority: int = 0
    headers: dict[str, list[str]] = field(default_factory=dict)
    status: int = 0
    ping_id: int = 0
    delta: int = 0
    settings: list[tuple[int, int, int]] = field(default_factory=list)

    @property
    def fin(self) -> bool:
        return bool(self.flags & FLAG_FIN)

    def header(self, name: str) -> str:
        values = self.headers.get(name.lower()) or [""]
        return values[0]


Frame = DataFrame | ControlFrame


def _decode_headers(block: bytes) -> dict[str, list[str]]:
    def u32(pos: int) -> int:
        if pos + 4 > len(block):
            raise ProtocolError("truncated header block")
        return struct.unpack_from(">I", block, pos)[0]

    count, pos = u32(0), 4
    out: dict[str, list[str]] = {}
    for _ in range(count):
        n = u32(pos)
        name = block[pos + 4 : pos + 4 + n].decode("latin-1").lower()
        pos += 4 + n
        n = u32(pos)
        value = block[pos + 4 : pos + 4 + n].decode("latin-1")
        pos += 4 + n
        out.setdefault(name, []).extend(value.split("\x00"))
    return out


def _encode_headers(headers: dict[str, list[str]]) -> bytes:
    parts = [struct.pack(">I", len(headers))]
    for name, values in headers.items():
        n = name.lower().encode("latin-1")
        v = "\x00".join(values).encode("latin-1")
        parts += [struct.pack(">I", len(n)), n, struct.pack(">I", len(v)), v]
    return b"".join(parts)


class FrameReader:
    """Incremental parser: ``feed(bytes)`` returns the frames completed so far."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._inflate = zlib.decompressobj(zdict=HEADER_DICTIONARY)

    def feed(self, data: bytes) -> list[Frame]:
        self._buf += data
        frames: list[Frame] = []
        while len(self._buf) >= 8:
            first, flags_len = struct.unpack_from(">II", self._buf, 0)
            length = flags_len & 0xFFFFFF
            if len(self._buf) < 8 + length:
                break
            payload = bytes(self._buf[8 : 8 + length])
            del self._buf[: 8 + length]
            flags = flags_len >> 24
            if first & 0x80000000:
                version = (first >> 16) & 0x7FFF
                if version != VERSION:
                    raise ProtocolError(f"unsupported SPDY version {version}")
                frame = self._control(first & 0xFFFF, flags, payload)
                if frame is not None:
                    frames.append(frame)
            else:
                frames.append(DataFrame(first & 0x7FFFFFFF, payload, flags))
        return frames

    def _headers(self, block: bytes) -> dict[str, list[str]]:
        try:
            return _decode_headers(self._inflate.decompress(block))
        except zlib.error as err:
            raise ProtocolError(f"bad header compression: {err}") from err

    def _control(self, kind: int, flags: int, p: bytes) -> ControlFrame | None:
        def u32(pos: int) -> int:
            if pos + 4 > len(p):
                raise ProtocolError(f"truncated control frame of type {kind}")
            return struct.unpack_from(">I", p, pos)[0]

        if kind == SYN_STREAM:
            if len(p) < 10:
                raise ProtocolError("truncated SYN_STREAM")
            return ControlFrame(
                kind,
                flags,
                stream_id=u32(0) & 0x7FFFFFFF,
                associated_id=u32(4) & 0x7FFFFFFF,
                priority=p[8] >> 5,
                headers=self._headers(p[10:]),
            )
        if kind in (SYN_REPLY, HEADERS):
            return ControlFrame(kind, flags, stream_id=u32(0) & 0x7FFFFFFF, headers=self._headers(p[4:]))
        if kind == RST_STREAM:
            return ControlFrame(kind, flags, stream_id=u32(0) & 0x7FFFFFFF, status=u32(4))
        if kind == PING:
            return ControlFrame(kind, flags, ping_id=u32(0))
        if kind == GOAWAY:
            return ControlFrame(kind, flags, stream_id=u32(0) & 0x7FFFFFFF, status=u32(4) if len(p) >= 8 else 0)
        if kind == WINDOW_UPDATE:
            return ControlFrame(kind, flags, stream_id=u32(0) & 0x7FFFFFFF, delta=u32(4) & 0x7FFFFFFF)
        if kind == SETTINGS:
            count = u32(0)
            settings = []
            for i in range(count):
                word, value = u32(4 + 8 * i), u32(8 + 8 * i)
                settings.append((word >> 24, word & 0xFFFFFF, value))
            return ControlFrame(kind, flags, settings=settings)
        return None  # unknown control frames are ignored, as the draft asks


class FrameWriter:
    """Serialises frames; keeps the connection's outgoing compression context."""

    def __init__(self) -> None:
        self._deflate = zlib.compressobj(zlib.Z_BEST_COMPRESSION, zlib.DEFLATED, 15, 8, zdict=HEADER_DICTIONARY)

    def _block(self, headers: dict[str, list[str]]) -> bytes:
        raw = _encode_headers(headers)
        return self._deflate.compress(raw) + self._deflate.flush(zlib.Z_SYNC_FLUSH)

    @staticmethod
    def _control(kind: int, flags: int, payload: bytes) -> bytes:
        return struct.pack(">HHI", 0x8000 | VERSION, kind, (flags << 24) | len(payload)) + payload

    def data(self, stream_id: int, data: bytes, *, fin: bool = False) -> bytes:
        if len(data) > MAX_FRAME:
            raise ValueError("a data frame carries at most 16 MiB")
        return struct.pack(">II", stream_id & 0x7FFFFFFF, ((FLAG_FIN if fin else 0) << 24) | len(data)) + data

    def syn_stream(self, stream_id: int, headers: dict[str, list[str]], *, fin: bool = False, priority: int = 0) -> bytes:
        payload = struct.pack(">IIBB", stream_id, 0, (priority & 7) << 5, 0) + self._block(headers)
        return self._control(SYN_STREAM, FLAG_FIN if fin else 0, payload)

    def syn_reply(self, stream_id: int, headers: dict[str, list[str]] | None = None, *, fin: bool = False) -> bytes:
        payload = struct.pack(">I", stream_id) + self._block(headers or {})
        return self._control(SYN_REPLY, FLAG_FIN if fin else 0, payload)

    def rst_stream(self, stream_id: int, status: int = RST_CANCEL) -> bytes:
        return self._control(RST_STREAM, 0, struct.pack(">II", stream_id, status))

    def ping(self, ping_id: int) -> bytes:
        return self._control(PING, 0, struct.pack(">I", ping_id))

    def goaway(self, last_stream_id: int, status: int = 0) -> bytes:
        return self._control(GOAWAY, 0, struct.pack(">II", last_stream_id, status))
