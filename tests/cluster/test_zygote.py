"""``k8py zygote`` and its client, with real processes.

The zygote forks a child per request and reports its exit code; a child runs
in its own session with its output in its log; a child killed by a signal is
reported as the negative signal; a malformed request is refused without a
fork; and when the zygote itself dies, the client kills the child it can no
longer follow, so the supervisor never believes a live component dead.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys

import pytest

from k8py.cluster.zygote_client import PopenProcess, ZygoteClient, ZygoteUnavailable, start_zygote


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
    reader, writer = await asyncio.open_unix_connection(client.socket_path)
    writer.write(b'{"argv": "not a list"}\n')
    await writer.drain()
    assert b"argv" in await reader.readline()
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


async def test_a_zygote_started_before_the_event_loop_is_adopted_and_followed(tmp_path):
    """``k8py up`` starts the zygote before it imports the supervisor; the
    supervisor follows that Popen as it follows its own subprocesses."""
    log = str(tmp_path / "logs" / "zygote.log")
    sock = str(tmp_path / "early.sock")
    adopted = PopenProcess(start_zygote([sys.executable, "-m", "k8py", "zygote", "--socket", sock], log))
    try:
        assert adopted.returncode is None and os.getsid(adopted.pid) == adopted.pid
        client = ZygoteClient(sock)
        assert await client.wait_ready(60, alive=lambda: adopted.returncode is None)
        child = await client.spawn(["--version"], str(tmp_path / "v.log"))
        assert await asyncio.wait_for(child.wait(), 30) == 0
        adopted.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(adopted.wait(), 30) == 0  # the zygote stops cleanly on SIGTERM
        assert adopted.returncode == 0 and not os.path.exists(sock)
    finally:
        adopted.kill()
    assert open(log).read().startswith("--- k8py up: starting zygote")


async def test_an_adopted_process_killed_reports_the_signal(tmp_path):
    adopted = PopenProcess(start_zygote([sys.executable, "-c", "import time; time.sleep(60)"], str(tmp_path / "sleep.log")))
    adopted.kill()
    assert await asyncio.wait_for(adopted.wait(), 30) == -signal.SIGKILL
    adopted.kill()  # a process already reaped: nothing to signal, no error
