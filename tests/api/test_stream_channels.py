"""k8py.api.stream_channels: negotiation, the error channel's Status, resize, port prefixes."""

from __future__ import annotations

import json

from k8py.api import stream_channels as ch


def test_the_servers_preference_wins_among_what_the_client_offers():
    assert ch.negotiate(["v4.channel.k8s.io, v5.channel.k8s.io"], ch.REMOTECOMMAND_PROTOCOLS) == ch.V5
    assert ch.negotiate(["v4.channel.k8s.io"], ch.REMOTECOMMAND_PROTOCOLS) == ch.V4
    # the legacy base channel protocol is served (as upstream); its base64 variant is not
    assert ch.negotiate(["base64.channel.k8s.io", "channel.k8s.io"], ch.REMOTECOMMAND_PROTOCOLS) == "channel.k8s.io"
    assert ch.negotiate(["base64.channel.k8s.io", "v4.base64.channel.k8s.io"], ch.REMOTECOMMAND_PROTOCOLS) is None


def test_exit_status_is_upstreams_shape():
    assert json.loads(ch.exit_status(0)) == {"metadata": {}, "status": "Success"}
    failure = json.loads(ch.exit_status(3, ["sh", "-c", "exit 3"]))
    assert failure["status"] == "Failure" and failure["reason"] == "NonZeroExitCode"
    assert failure["details"]["causes"] == [{"reason": "ExitCode", "message": "3"}]
    assert ch.exit_code_of(ch.exit_status(3)) == 3 and ch.exit_code_of(ch.exit_status(0)) == 0
    assert ch.exit_code_of(ch.failure_status("boom")) is None


def test_resize_messages():
    assert ch.parse_resize(b'{"Width":120,"Height":40}') == (120, 40)
    assert ch.parse_resize(b'{"Width":-1,"Height":40}') is None
    assert ch.parse_resize(b"not json") is None


def test_port_prefixes_are_little_endian():
    assert ch.port_prefix(8080) == b"\x90\x1f"
    assert ch.parse_port_prefix(ch.port_prefix(443)) == 443
    assert ch.parse_port_prefix(b"\x01") is None


def test_flags_read_as_go_parsebool():
    assert all(ch.query_flag(v) for v in ("1", "true", "True", "TRUE", "t"))
    assert not any(ch.query_flag(v) for v in ("0", "false", "", None, "yes"))
