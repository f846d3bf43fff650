"""``k8py zygote --socket PATH``: import k8py once, fork every component from it.

Why: each component of ``k8py up`` is its own process, and each used to
start a fresh interpreter that imported aiohttp, the API machinery and its
own package — about a second of CPU apiece, six at once on two cores, and
the same modules resident six times. The zygote (Android's word; Python's
``multiprocessing`` calls it a fork server) imports them once, then forks a
child per component: the child starts at once, and the pages of the imported
modules stay shared between all of them (``gc.freeze()`` before each fork
keeps the collector from touching, and so copying, them; the holes of the C
heap are filled, so that a child's allocations do not write into them either:
:mod:`k8py.cli.heap_holes`).

Protocol, over a Unix stream socket, one connection per child: the
supervisor sends one JSON line ``{"argv": [...], "log": PATH}``
(``argv`` as for ``k8py``, e.g. ``["scheduler", "--kubeconfig", F]``); the
zygote forks and answers ``{"pid": N}`` once the child leads its own
session (so the pid is also a process group to signal), and when the child exits
``{"exit": CODE}`` (a negative code: killed by that signal), then closes the
connection. A connection that closes without ``exit`` means the zygote died:
the child may still run, and the supervisor must treat it as unknown. Once
every component is forked, ``{"retire": true}`` makes the zygote answer
``{"retired": true}`` and become a bare reaper of its children that reports
their exits as before and forks nothing (:mod:`k8py.cli.zygote_reaper`: the
pages its children copied were its alone).

The child is what ``python -m k8py ARGV`` would have been: its own session
(``setsid``), stdin from ``/dev/null``, stdout and stderr appended to the
log, default signal handlers, ``sys.argv`` set, ``k8py.cli.main.main(argv)``
run and its result the exit code. Its ``/proc/PID/cmdline`` stays the
zygote's (``k8py up …`` when forked from it); its ``comm`` (what ``top``
shows) is ``k8py-<component>``, and with its output in ``DATA_DIR/logs``
that is how ``k8py down``'s sweep knows it (:mod:`k8py.cluster.sweep`).

``k8py up`` does not start the zygote as a command: :func:`fork_serve`
forks the ``k8py up`` process itself into it, before that process has a
thread or an event loop, so the zygote starts with what ``k8py up`` had
already imported (the interpreter, asyncio, the CLI) and goes straight to
the API server's modules, which the API server's start waits for. It is then
named ``k8py-zygote`` and writes to its log like a zygote started as
``k8py zygote --socket PATH`` (which is how the supervisor restarts it).

Invariants: the zygote never starts an event loop or a thread, so a fork
copies no lock held by another thread and no running loop; modules are
imported in two phases, the API server's first, so the first fork (the API
server) is not held up by the rest, with the garbage collector off until
both are done (every child turns it back on); only the API server (and a
node's containerd) is forked before the second phase is done, every other
request is answered once it is (:data:`FORK_WHILE_PRELOADING`), and the
second phase starts only once a first request came, or after
:data:`FIRST_REQUEST_GRACE`, so that it does not hold the API server's fork up;
the zygote exits when its parent does.

Trust roots: aiohttp is imported with the system trust roots of its TLS
contexts deferred until the API server is forked (:mod:`k8py.cli.trust_roots`).
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import json
import os
import selectors
import signal
import socket
import sys
import time
from typing import Any, Iterator

from k8py.cli.heap_holes import fill_heap_holes
from k8py.cli.trust_roots import deferred_trust_roots, load_trust_roots

__all__ = ["serve", "fork_serve", "PRELOAD_FIRST", "PRELOAD_REST"]

#: what the API server needs, imported before the socket accepts anything
PRELOAD_FIRST = ("k8py.cli.main", "k8py.apiserver.server", "k8py.storage.sqlite")
#: the other components, imported while the API server starts: each package's
#: entry module and the modules it imports only once it runs (the controllers
#: the manager loads by name, the process runtime and image service a kubelet
#: picks, the proxy's nftables probe, dnspython's asyncio backend); what a child
#: imports itself is private to it, what the zygote imported is shared by all
PRELOAD_REST = (
    "k8py.controllers.controller_manager",
    "k8py.scheduler.app",
    "k8py.kubelet.kubelet",
    "k8py.kubelet.runtime.process.runtime",
    "k8py.kubelet.runtime.process.images",
    "k8py.kubelet.runtime.process.image_service",
    "k8py.kubelet.images.puller",
    "k8py.kubelet.images.gc",
    "k8py.kubelet.node_cleanup",
    "k8py.kubelet.cgroups.tree",
    "k8py.proxy.app",
    "k8py.proxy.nftables.backend",
    "dns.asyncbackend",
    "dns._asyncio_backend",
)


#: forked at once even while the rest preloads: what the others wait for (the API
#: server; a node's containerd). Any other request waits until preloading is done:
#: forked earlier, a child would import for itself what the zygote is importing for
#: all — twice the CPU on a busy machine, and memory of its own instead of shared.
FORK_WHILE_PRELOADING = frozenset({"apiserver", "containerd"})
#: how long the second phase waits for a first request once the socket accepts: the
#: supervisor asks for the API server a few milliseconds after the socket appears,
#: and a module (or the trust roots) being imported meanwhile would hold that fork up
FIRST_REQUEST_GRACE = 0.2


def _preload_rest() -> Iterator[str]:
    """The modules of :data:`PRELOAD_REST`, one at a time, each controller's module after the manager's."""
    yield PRELOAD_REST[0]
    from k8py.controllers.registry import CONTROLLER_MODULES  # imported by the manager just now

    yield from dict.fromkeys(CONTROLLER_MODULES.values())
    yield from PRELOAD_REST[1:]

_PR_SET_NAME, _PR_SET_PDEATHSIG = 15, 1


def _prctl(option: int, value: int | bytes) -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: names stay as they are, and the parent's death is noticed on the socket


def _preload(modules: tuple[str, ...]) -> None:
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as err:  # an optional extra missing: the child imports (and reports) it itself
            print(f"zygote: could not preload {name}: {err}", file=sys.stderr, flush=True)


def _child(request: dict[str, Any], started: int) -> None:
    """Runs in the forked child; never returns. Writes to ``started`` once it
    leads its own session (so the pid the supervisor gets is a process group)."""
    code = 1
    try:
        gc.enable()  # (off while the zygote preloads)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.setsid()
        _prctl(_PR_SET_PDEATHSIG, 0)
        argv = [str(a) for a in request["argv"]]
        _prctl(_PR_SET_NAME, f"k8py-{argv[0] if argv else 'child'}"[:15].encode())
        os.write(started, b"1")
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # the listener, the selector, other children's sockets
        sys.argv = ["k8py", *argv]
        from k8py.cli.main import main

        result = main(argv)
        code = result if isinstance(result, int) else 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except BaseException:  # noqa: BLE001 - the child's last words go to its log
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)


def fork_serve(socket_path: str, log: str) -> int:
    """Fork this process into the zygote; returns its pid (in the parent only).
    Call it before this process starts a thread or an event loop. The child
    leads its own session, its output appended to ``log``."""
    os.makedirs(os.path.dirname(log), exist_ok=True)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # or the child would write the parent's buffered output again
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        os.setsid()
        _prctl(_PR_SET_NAME, b"k8py-zygote")
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        out = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(out, f"--- k8py up: starting zygote (forked from k8py up, pid {os.getppid()})\n".encode())
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        sys.argv = ["k8py", "zygote", "--socket", socket_path]
        code = serve(socket_path)
    except BaseException:  # noqa: BLE001 - the zygote's last words go to its log
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)


def _send(conn: socket.socket, message: dict[str, Any]) -> None:
    try:
        conn.sendall(json.dumps(message).encode() + b"\n")
    except OSError:
        pass  # the supervisor went away; the child is reaped all the same


def serve(socket_path: str) -> int:
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)  # the zygote goes with the supervisor
    # no garbage collection while preloading: importing a thousand modules trips
    # several full collections, a fifth of the import CPU (measured), and they
    # find next to nothing (import-time cycles are few); re-enabled once done,
    # and in every child at once
    gc.disable()
    with deferred_trust_roots() as trust_roots:
        _preload(("aiohttp",))
    _preload(PRELOAD_FIRST)
    from k8py.cli.main import shared_parser

    shared_parser()  # every child parses its argv with it: built once, here
    gc.freeze()
    wakeup_r, wakeup_w = socket.socketpair()
    wakeup_r.setblocking(False)
    wakeup_w.setblocking(False)
    signal.set_wakeup_fd(wakeup_w.fileno(), warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    stopping = False

    def stop(*_: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if os.path.exists(socket_path):
        os.unlink(socket_path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path + ".tmp")
    os.chmod(socket_path + ".tmp", 0o600)
    listener.listen(64)
    os.rename(socket_path + ".tmp", socket_path)  # the path appears only once it accepts
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(wakeup_r, selectors.EVENT_READ, "signal")
    children: dict[int, socket.socket] = {}
    pending: dict[socket.socket, bytes] = {}
    rest = _preload_rest()
    preloading = True
    deferred: list[tuple[socket.socket, dict[str, Any]]] = []
    grace_until, asked = time.monotonic() + FIRST_REQUEST_GRACE, False
    try:
        while not stopping:
            timeout = None if not preloading else 0.0 if asked else max(0.0, grace_until - time.monotonic())
            events = selector.select(timeout=timeout)
            if not events and preloading:
                if trust_roots:  # the API server (which needs none, see above) is forked or still to ask: now, before any other
                    load_trust_roots(trust_roots)
                    continue
                module = next(rest, None)
                if module is None:
                    preloading = False
                    gc.enable()
                    for conn, request in deferred:
                        _fork(conn, request, children)
                    deferred.clear()
                else:
                    _preload((module,))
                    gc.freeze()
                continue
            for key, _ in events:
                if key.data == "accept":
                    conn, _addr = listener.accept()
                    pending[conn] = b""
                    selector.register(conn, selectors.EVENT_READ, "request")
                elif key.data == "signal":
                    try:
                        while wakeup_r.recv(512):
                            pass
                    except BlockingIOError:
                        pass
                    _reap(children)
                else:
                    conn = key.fileobj  # type: ignore[assignment]
                    request = _read_request(conn, pending, selector)
                    asked = asked or request is not None
                    if request is None:
                        pass
                    elif request.get("retire") is True and (preloading or deferred):
                        _send(conn, {"error": "still preloading: not retiring"})
                        conn.close()
                    elif request.get("retire") is True:
                        _retire(conn, listener, selector, socket_path, children)
                    elif preloading and (request["argv"] or [""])[0] not in FORK_WHILE_PRELOADING:
                        deferred.append((conn, request))
                    else:
                        _fork(conn, request, children)
            _reap(children)
    finally:
        selector.close()
        listener.close()
        for conn in children.values():
            conn.close()
        try:
            os.unlink(socket_path)
        except OSError:
            pass
    return 0


def _read_request(conn: socket.socket, pending: dict[socket.socket, bytes],
                  selector: selectors.BaseSelector) -> dict[str, Any] | None:
    """The request on ``conn`` once it has all come (None until then, or when it was refused)."""
    try:
        chunk = conn.recv(65536)
    except OSError:
        chunk = b""
    if not chunk:
        selector.unregister(conn)
        pending.pop(conn, None)
        conn.close()
        return None
    buffer = pending[conn] + chunk
    if b"\n" not in buffer:
        pending[conn] = buffer
        return None
    selector.unregister(conn)
    del pending[conn]
    try:
        request = json.loads(buffer.split(b"\n", 1)[0])
        if not isinstance(request, dict):
            raise ValueError("a request is a JSON object")
        if request.get("retire") is True:
            return request
        if not isinstance(request.get("argv"), list) or not isinstance(request.get("log"), str):
            raise ValueError("a request needs argv (a list) and log (a path)")
    except ValueError as err:
        _send(conn, {"error": str(err)})
        conn.close()
        return None
    return request


def _fork(conn: socket.socket, request: dict[str, Any], children: dict[int, socket.socket]) -> None:
    gc.freeze()
    fill_heap_holes()  # (a child's first allocations would copy the pages around them: k8py.cli.heap_holes)
    started_r, started_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        _child(request, started_w)
    os.close(started_w)
    os.read(started_r, 1)  # returns once the child leads its session (or has died)
    os.close(started_r)
    children[pid] = conn
    _send(conn, {"pid": pid})


def _retire(conn: socket.socket, listener: socket.socket, selector: selectors.BaseSelector, socket_path: str,
            children: dict[int, socket.socket]) -> None:
    """Become the reaper (:mod:`k8py.cli.zygote_reaper`); never returns. The
    socket goes first, so that a later request fails at once."""
    _reap(children)
    selector.close()
    listener.close()
    try:
        os.unlink(socket_path)
    except OSError:
        pass
    _send(conn, {"retired": True, "children": len(children)})
    conn.close()
    from k8py.cli.zygote_reaper import retire

    retire({pid: c.fileno() for pid, c in children.items()})


def _reap(children: dict[int, socket.socket]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is not None:
            _send(conn, {"exit": os.waitstatus_to_exitcode(status)})
            conn.close()
