"""The channel protocols of exec, attach and port-forward over WebSocket (no I/O).

Shared by the API server (which relays) and the kubelet (which serves), so
both sides read the same constants.

**remotecommand** (exec, attach), subprotocols ``v5.channel.k8s.io`` and
``v4.channel.k8s.io``: every binary message starts with one channel byte —
0 stdin, 1 stdout, 2 stderr, 3 error, 4 resize. The error channel carries one
JSON ``Status`` when the command ends: ``Success``, or ``Failure`` with
``reason: NonZeroExitCode`` and the exit code as ``details.causes[0]``
(``reason: ExitCode``), or another failure (``InternalError``). Resize
messages are JSON ``{"Width": W, "Height": H}``. v5 adds the CLOSE message
``0xFF <channel>``: the client half-closes stdin with ``0xFF 0x00``; under v4
a client can only end stdin by closing the socket. The legacy base protocol —
``channel.k8s.io``, or no subprotocol at all, as upstream's streaming server
still serves it — has the same channels, but its error channel carries only a
failure, as plain text (the ``Status`` message), and nothing on success
(:func:`error_channel_message`).

**portforward** over WebSocket (``v4.channel.k8s.io`` or
``portforward.k8s.io``; the ``port`` query parameter may repeat): port *i*
gets data channel ``2i`` and error channel ``2i+1``; the first message the
server sends on each channel is the port as a little-endian uint16.
"""

from __future__ import annotations

import struct
from typing import Any, Iterable

import orjson

__all__ = [
    "V5",
    "V4",
    "CHANNEL",
    "REMOTECOMMAND_PROTOCOLS",
    "PORTFORWARD_PROTOCOLS",
    "TUNNEL_PORTFORWARD",
    "STDIN",
    "STDOUT",
    "STDERR",
    "ERROR",
    "RESIZE",
    "CLOSE",
    "negotiate",
    "frame",
    "close_frame",
    "exit_status",
    "failure_status",
    "exit_code_of",
    "error_channel_message",
    "parse_resize",
    "port_prefix",
    "parse_port_prefix",
    "query_flag",
]

V5 = "v5.channel.k8s.io"
V4 = "v4.channel.k8s.io"
#: the legacy base channel protocol (also what a client offering no subprotocol gets)
CHANNEL = "channel.k8s.io"
#: what exec / attach serve, most preferred first
REMOTECOMMAND_PROTOCOLS = (V5, V4, CHANNEL)
#: what a WebSocket port-forward serves ("" when the client offers none)
PORTFORWARD_PROTOCOLS = ("portforward.k8s.io", V4)
#: kubectl >= 1.31 tunnels SPDY port-forwarding through a WebSocket with this
TUNNEL_PORTFORWARD = "SPDY/3.1+portforward.k8s.io"

STDIN = 0
STDOUT = 1
STDERR = 2
ERROR = 3
RESIZE = 4
#: v5's CLOSE message marker: ``0xFF <channel>`` half-closes that channel
CLOSE = 255


def negotiate(offered: Iterable[str], supported: Iterable[str]) -> str | None:
    """The first of ``supported`` the client offered (the server's preference),
    or None. ``offered`` may hold comma-joined header values."""
    offers = {p.strip() for value in offered for p in value.split(",") if p.strip()}
    for protocol in supported:
        if protocol in offers:
            return protocol
    return None


def frame(channel: int, data: bytes) -> bytes:
    return bytes((channel,)) + data


def close_frame(channel: int) -> bytes:
    return bytes((CLOSE, channel))


def _status(status: str, **rest: Any) -> dict[str, Any]:
    return {"metadata": {}, "status": status, **rest}


def exit_status(exit_code: int, command: list[str] | None = None) -> bytes:
    """The error-channel message for a finished command, as the kubelet writes it."""
    if exit_code == 0:
        return orjson.dumps(_status("Success"))
    # the command as Go's %v prints a []string: [sh -c exit 3]
    what = f"error executing command [{' '.join(command)}], exit code {exit_code}" if command else f"exit code {exit_code}"
    return orjson.dumps(
        _status(
            "Failure",
            message=f"command terminated with non-zero exit code: {what}",
            reason="NonZeroExitCode",
            details={"causes": [{"reason": "ExitCode", "message": str(exit_code)}]},
        )
    )


def failure_status(message: str, *, reason: str = "InternalError", code: int = 500) -> bytes:
    """The error-channel message when the command could not run at all."""
    return orjson.dumps(
        _status("Failure", message=message, reason=reason, details={"causes": [{"message": message}]}, code=code)
    )


def exit_code_of(message: bytes) -> int | None:
    """The exit code an error-channel message reports (0 for Success), or
    None for a failure that is not an exit code."""
    try:
        status = orjson.loads(message)
    except orjson.JSONDecodeError:
        return None
    if status.get("status") == "Success":
        return 0
    if status.get("reason") == "NonZeroExitCode":
        for cause in (status.get("details") or {}).get("causes") or []:
            if cause.get("reason") == "ExitCode":
                try:
                    return int(cause.get("message", ""))
                except ValueError:
                    return None
    return None


def error_channel_message(protocol: str, status: bytes) -> bytes | None:
    """What goes on the error channel for the ``Status`` ``status`` under ``protocol``:
    the JSON itself for v4 and v5; under the legacy protocols (``channel.k8s.io``, or
    none) the failure's message as text, and nothing (None) for ``Success``."""
    if protocol in (V5, V4):
        return status
    try:
        parsed = orjson.loads(status)
    except orjson.JSONDecodeError:
        return status
    if not isinstance(parsed, dict):
        return status
    if parsed.get("status") == "Success":
        return None
    return str(parsed.get("message") or "").encode()


def parse_resize(message: bytes) -> tuple[int, int] | None:
    """(width, height) from a resize message; None if it is not one."""
    try:
        size = orjson.loads(message)
        width, height = int(size["Width"]), int(size["Height"])
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
    if not (0 <= width <= 0xFFFF and 0 <= height <= 0xFFFF):
        return None
    return width, height


def port_prefix(port: int) -> bytes:
    return struct.pack("<H", port)


def parse_port_prefix(data: bytes) -> int | None:
    if len(data) < 2:
        return None
    return int(struct.unpack_from("<H", data, 0)[0])


_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})


def query_flag(value: str | None) -> bool:
    """A stream option flag (``stdin=true``, ``input=1``) as Go's ParseBool reads it."""
    return value in _TRUE
