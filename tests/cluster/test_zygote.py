"""``k8py zygote`` and its client, with real processes.

The zygote forks a child per request and reports its exit code; a child runs
in its own session with its output in its log; a child killed by a signal is
reported as the negative signal; a malformed request is refused without a
fork; when the zygote itself dies, the client kills the child it can no
longer follow, so the supervisor never believes a live component dead; a
retired zygote forks nothing and goes on reporting its children's exits.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys

import pytest

from k8py.cluster.zygote_client import AdoptedChild, ZygoteClient, ZygoteUnavailable
from tests.cluster.up_helpers import wait_for


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


@pytest.fixture
def zygote(tmp_path):
    sock = str(tmp_path / "z.sock")
    proc = subprocess.Popen([sys.executable, "-m", "k8py", "zygote", "--socket", sock],
                            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "zygote.log", "wb"), start_new_session=True)
    try:
        yield proc, ZygoteClient(sock)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=30)


async def test_forks_a_command_and_reports_how_it_ended(zygote, tmp_path):
    proc, client = zygote
    assert await client.wait_ready(60, alive=lambda: proc.poll() is None)
    log = str(tmp_path / "version.log")
    child = await client.spawn(["--version"], log)
    assert await asyncio.wait_for(child.wait(), 30) == 0
    assert open(log).read().startswith("k8py ")

    # a long-running child (a zygote of its own) in its own session, killed by a signal
    inner = str(tmp_path / "inner.log")
    child = await client.spawn(["zygote", "--socket", str(tmp_path / "inner.sock")], inner)
    assert os.getsid(child.pid) == child.pid
    with open(f"/proc/{child.pid}/comm") as f:
        assert f.read().strip() == "k8py-zygote"
    child.send_signal(signal.SIGKILL)
    assert await asyncio.wait_for(child.wait(), 30) == -signal.SIGKILL


async def test_a_malformed_request_is_refused(zygote, tmp_path):
    proc, client = zygote
    assert await client.wait_ready(60, alive=lambda: proc.poll() is None)
    for request, error in ((b'{"argv": "not a list"}\n', b"argv"), (b'["argv"]\n', b"JSON object"), (b"{\n", b"error")):
        reader, writer = await asyncio.open_unix_connection(client.socket_path)
        writer.write(request)
        await writer.drain()
        assert error in await reader.readline()
        writer.close()
    assert proc.poll() is None  # the zygote goes on serving
    child = await client.spawn(["--version"], str(tmp_path / "v.log"))
    assert await asyncio.wait_for(child.wait(), 30) == 0


async def test_a_child_of_a_dead_zygote_is_killed_not_lost(zygote, tmp_path):
    proc, client = zygote
    assert await client.wait_ready(60, alive=lambda: proc.poll() is None)
    child = await client.spawn(["zygote", "--socket", str(tmp_path / "inner.sock")], str(tmp_path / "inner.log"))
    assert _alive(child.pid)
    proc.kill()
    proc.wait(timeout=30)
    assert await asyncio.wait_for(child.wait(), 30) == -signal.SIGKILL
    assert not _alive(child.pid)
    with pytest.raises(ZygoteUnavailable):
        await client.spawn(["--version"], str(tmp_path / "v.log"))


async def test_a_retired_zygote_forks_nothing_and_still_reports_its_childrens_exits(zygote, tmp_path):
    """Once every component is forked the supervisor retires the zygote: the same
    process (same pid, same name, so its children keep their parent and k8py
    down's sweep still knows it) becomes a bare interpreter that only reaps."""
    proc, client = zygote
    assert await client.wait_ready(60, alive=lambda: proc.poll() is None)
    first = await client.spawn(["zygote", "--socket", str(tmp_path / "a.sock")], str(tmp_path / "a.log"))
    second = await client.spawn(["zygote", "--socket", str(tmp_path / "b.sock")], str(tmp_path / "b.log"))
    assert await client.retire()
    with pytest.raises(ZygoteUnavailable):  # its socket went before it answered
        await client.spawn(["--version"], str(tmp_path / "v.log"))
    # (it answers, then replaces its image: the same pid running the reaper, named again as the zygote)
    await asyncio.to_thread(wait_for, lambda: _read(f"/proc/{proc.pid}/comm") == b"k8py-zygote\n"
                            and b"zygote_reaper.py" in _read(f"/proc/{proc.pid}/cmdline"), "the reaper", 30)
    with open(f"/proc/{first.pid}/stat") as f:
        assert int(f.read().rsplit(")", 1)[1].split()[1]) == proc.pid
    first.send_signal(signal.SIGKILL)
    assert await asyncio.wait_for(first.wait(), 30) == -signal.SIGKILL
    assert _alive(second.pid) and proc.poll() is None
    second.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(second.wait(), 30) == 0  # (a zygote stops cleanly on SIGTERM)
    assert await asyncio.to_thread(proc.wait, 30) == 0  # no child left: the reaper is done
    assert not await client.retire()


async def test_a_zygote_started_before_the_event_loop_is_adopted_and_followed(tmp_path):
    """``k8py up`` forks the zygote out of itself before it imports the
    supervisor; the supervisor follows that pid as it follows its own
    subprocesses. (Forked here by a child interpreter, as ``k8py up`` does:
    the test process has threads, and forking it could copy a held lock.)"""
    log = str(tmp_path / "logs" / "zygote.log")
    sock = str(tmp_path / "early.sock")
    script = ("import os, sys, time; from k8py.cli.zygote import fork_serve; "
              f"pid = fork_serve({sock!r}, {log!r}); print(pid, flush=True); os.waitpid(pid, 0)")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    pid = 0
    try:
        pid = int(parent.stdout.readline())
        client = ZygoteClient(sock)
        assert await client.wait_ready(60, alive=lambda: _alive(pid))  # (it names itself before it listens)
        assert os.getsid(pid) == pid
        with open(f"/proc/{pid}/comm") as f:
            assert f.read().strip() == "k8py-zygote"
        child = await client.spawn(["--version"], str(tmp_path / "v.log"))
        assert await asyncio.wait_for(child.wait(), 30) == 0
        os.kill(pid, signal.SIGTERM)
        assert parent.wait(timeout=30) == 0 and not os.path.exists(sock)  # the zygote stops cleanly on SIGTERM
    finally:
        parent.kill()
        parent.wait()
        if pid and _alive(pid):  # a failed check must not leave the forked zygote behind (it outlives its parent)
            os.killpg(pid, signal.SIGKILL)
    assert open(log).read().startswith("--- k8py up: starting zygote (forked from k8py up")


async def test_an_adopted_child_reports_how_it_ended():
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    adopted = AdoptedChild(sleeper.pid)  # followed by its pid (Popen is not asked again)
    assert adopted.returncode is None
    adopted.kill()
    assert await asyncio.wait_for(adopted.wait(), 30) == -signal.SIGKILL
    assert adopted.returncode == -signal.SIGKILL
    adopted.kill()  # reaped already: nothing to signal, no error
    exits = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    assert await asyncio.wait_for(AdoptedChild(exits.pid).wait(), 30) == 3


def test_the_zygote_preloads_every_module_its_children_import_later():
    """What a child imports itself is its own memory; what the zygote imported
    is shared by every child. The lists must name modules that exist (a
    renamed one would be skipped with only a line in the zygote's log), and
    every controller the manager can load."""
    import importlib

    from k8py.cli.zygote import PRELOAD_FIRST, _preload_rest
    from k8py.controllers.registry import CONTROLLER_MODULES

    rest = list(_preload_rest())
    assert set(CONTROLLER_MODULES.values()) <= set(rest)
    for name in (*PRELOAD_FIRST, *rest):
        importlib.import_module(name)



def test_trust_roots_deferred_while_a_module_is_imported_then_loaded(tmp_path, monkeypatch):
    """The zygote imports aiohttp with the system trust roots of the TLS contexts it
    makes at import left out (60 ms of CPU before the API server's fork), and loads
    them before any other component is forked; ssl itself is left as it was."""
    import ssl

    from k8py.cli.trust_roots import deferred_trust_roots, load_trust_roots

    expected = ssl.create_default_context().cert_store_stats()["x509_ca"]  # (0 on a machine without any: still as before)
    (tmp_path / "makes_contexts.py").write_text(
        "import ssl\n"
        "VERIFIED = ssl.create_default_context()\n"
        "UNVERIFIED = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)\n"
        "UNVERIFIED.check_hostname = False\n"
        "UNVERIFIED.verify_mode = ssl.CERT_NONE\n"
        "UNVERIFIED.set_default_verify_paths()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with deferred_trust_roots() as contexts:
        import makes_contexts

    assert {id(c) for c in contexts} == {id(makes_contexts.VERIFIED), id(makes_contexts.UNVERIFIED)}
    assert makes_contexts.VERIFIED.cert_store_stats()["x509_ca"] == 0
    assert "set_default_verify_paths" not in ssl.SSLContext.__dict__
    assert ssl.create_default_context().cert_store_stats()["x509_ca"] == expected  # ssl as before
    load_trust_roots(contexts)
    assert contexts == []
    assert makes_contexts.VERIFIED.cert_store_stats()["x509_ca"] == expected
    assert makes_contexts.UNVERIFIED.cert_store_stats()["x509_ca"] == expected
