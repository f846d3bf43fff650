"""k8py.api.spdy: frames round-trip, header compression keeps one context per direction."""

from __future__ import annotations

import zlib

import pytest

from k8py.api import spdy


def test_the_dictionary_is_the_spdy3_one():
    # its length and Adler-32 (the dictionary id a peer's zlib stream names) as SPDY/3 peers have them
    assert len(spdy.HEADER_DICTIONARY) == 1423
    assert zlib.adler32(spdy.HEADER_DICTIONARY) == 0xE3C6A7C2
    assert spdy.HEADER_DICTIONARY.startswith(b"\x00\x00\x00\x07options\x00\x00\x00\x04head")
    assert spdy.HEADER_DICTIONARY.endswith(b"utf-,*,enq=0.")


def test_frames_survive_being_split_at_any_byte():
    w = spdy.FrameWriter()
    wire = (
        w.syn_stream(1, {"streamtype": ["error"], "port": ["80"], "requestid": ["0"]})
        + w.syn_stream(3, {"streamtype": ["data"], "port": ["80"], "requestid": ["0"]})
        + w.data(3, b"GET / HTTP/1.1\r\n\r\n")
        + w.data(3, b"", fin=True)
        + w.ping(7)
        + w.rst_stream(1, spdy.RST_CANCEL)
        + w.goaway(3)
    )
    for cut in range(0, len(wire), 7):
        r = spdy.FrameReader()
        frames = r.feed(wire[:cut]) + r.feed(wire[cut:])
        kinds = [f.type if isinstance(f, spdy.ControlFrame) else "data" for f in frames]
        assert kinds == [spdy.SYN_STREAM, spdy.SYN_STREAM, "data", "data", spdy.PING, spdy.RST_STREAM, spdy.GOAWAY]
        assert frames[1].header("streamtype") == "data" and frames[1].header("requestid") == "0"
        assert frames[2].data == b"GET / HTTP/1.1\r\n\r\n" and not frames[2].fin
        assert frames[3].fin and frames[4].ping_id == 7 and frames[5].status == spdy.RST_CANCEL


def test_header_blocks_share_one_compression_context():
    w, r = spdy.FrameWriter(), spdy.FrameReader()
    first = w.syn_reply(1, {"x": ["same value"]})
    second = w.syn_reply(3, {"x": ["same value"]})
    assert len(second) < len(first)  # the second block refers back into the first
    assert [f.header("x") for f in r.feed(first + second)] == ["same value", "same value"]
    # a reader that missed the first block cannot read the second
    with pytest.raises(spdy.ProtocolError):
        spdy.FrameReader().feed(second)


def test_multi_valued_headers_are_nul_separated_and_names_lowercased():
    w, r = spdy.FrameWriter(), spdy.FrameReader()
    [frame] = r.feed(w.syn_stream(5, {"X-Stream-Protocol-Version": ["v4.channel.k8s.io", "channel.k8s.io"]}))
    assert frame.headers == {"x-stream-protocol-version": ["v4.channel.k8s.io", "channel.k8s.io"]}


def test_a_wrong_version_is_a_protocol_error():
    bad = bytearray(spdy.FrameWriter().ping(1))
    bad[1] = 2
    with pytest.raises(spdy.ProtocolError):
        spdy.FrameReader().feed(bytes(bad))


def test_unknown_control_frames_are_skipped():
    unknown = b"\x80\x03\x00\x63\x00\x00\x00\x02ab"
    r = spdy.FrameReader()
    [frame] = r.feed(unknown + spdy.FrameWriter().ping(9))
    assert frame.type == spdy.PING and frame.ping_id == 9
