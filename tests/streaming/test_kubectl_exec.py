"""``kubectl exec`` / ``cp`` and the official client's stream() through pods/exec to the kubelet.

The runtime double runs exec'd commands on the host (as the process runtime
does without bwrap), so files the test writes are what the "container" sees.
"""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import time

from kubernetes.stream import stream

from tests.support.kube import KUBECTL


def _running(cluster, name="web", *containers):
    cluster.pod(name, *containers)
    for c in containers or ("main",):
        cluster.runtime.add("default", name, c)


def test_exec_prints_stdout_and_stderr_apart(cluster):
    _running(cluster)
    result = cluster.kubectl.run("exec", "web", "--", "sh", "-c", "echo out; echo err >&2")
    assert result.stdout == "out\n"
    assert result.stderr == "err\n"


def test_exit_codes_come_back_from_the_error_channel(cluster):
    _running(cluster)
    result = cluster.kubectl.run("exec", "web", "--", "sh", "-c", "exit 3", check=False)
    assert result.returncode == 3
    assert "command terminated with exit code 3" in result.stderr
    assert cluster.kubectl.run("exec", "web", "--", "true").returncode == 0


def test_stdin_reaches_the_command_and_its_end_closes_it(cluster):
    _running(cluster)
    data = "".join(f"line {i}\n" for i in range(2000))
    result = cluster.kubectl.run("exec", "-i", "web", "--", "sh", "-c", "wc -l", input=data)
    assert result.stdout.strip() == "2000"
    result = cluster.kubectl.run("exec", "-i", "web", "--", "cat", input=data)
    assert result.stdout == data


def test_exec_chooses_the_container(cluster):
    _running(cluster, "web", "main", "side")
    assert cluster.kubectl.run("exec", "web", "-c", "side", "--", "echo", "x").stdout == "x\n"
    result = cluster.kubectl.run("exec", "web", "--", "echo", "y")
    assert result.stdout == "y\n"
    assert 'Defaulted container "main" out of: main, side' in result.stderr


def test_exec_into_a_missing_or_stopped_container_is_refused(cluster):
    cluster.pod("web", "main", "side")
    c = cluster.runtime.add("default", "web", "main")
    cluster.runtime.exit(c.id)
    result = cluster.kubectl.run("exec", "web", "-c", "main", "--", "true", check=False)
    assert result.returncode != 0
    assert 'container "main" in pod "web" is not running' in result.stderr
    result = cluster.kubectl.run("exec", "web", "-c", "side", "--", "true", check=False)
    assert 'container "side" in pod "web" is waiting to start' in result.stderr
    result = cluster.kubectl.run("exec", "web", "-c", "nope", "--", "true", check=False)
    assert result.returncode != 0


def test_a_command_that_does_not_exist_is_an_error(cluster):
    _running(cluster)
    result = cluster.kubectl.run("exec", "web", "--", "/no/such/binary", check=False)
    # as a shell (and runc) reports it: the reason on stderr, exit code 127
    assert result.returncode == 127
    assert 'exec: "/no/such/binary": No such file or directory' in result.stderr


def test_exec_it_runs_in_a_terminal_and_resizes(cluster):
    _running(cluster)
    env = {**os.environ, "HOME": cluster.kubectl.home, "KUBECONFIG": cluster.kubectl.kubeconfig}
    master, slave = pty.openpty()
    os.set_blocking(master, False)
    import fcntl
    import struct
    import termios

    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 101, 0, 0))
    proc = subprocess.Popen(
        [KUBECTL, "exec", "-it", "web", "--", "sh"], stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True
    )
    os.close(slave)
    seen = b""

    def read_until(marker: bytes, timeout: float = 30) -> None:
        nonlocal seen
        deadline = time.monotonic() + timeout
        while marker not in seen:
            assert time.monotonic() < deadline, f"no {marker!r} in {seen!r}"
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    seen += os.read(master, 4096)
                except OSError:
                    break

    try:
        read_until(b"#")  # the shell's prompt: kubectl has put the terminal in raw mode by then
        os.write(master, b"test -t 0 && echo TTY-$((6*7))\n")  # the answer, not the echoed line, says 42
        read_until(b"TTY-42")
        # kubectl sends the terminal's size on its resize stream beside stdin, in no set order (as
        # client-go's resize queue), and the command starts before any resize (as upstream's CRI
        # streaming server): a command typed at once may run before the size arrives
        deadline = time.monotonic() + 30
        while b"33 101" not in seen:
            assert time.monotonic() < deadline, seen
            os.write(master, b"stty size\n")
            try:
                read_until(b"33 101", timeout=2)
            except AssertionError:
                pass
        # the terminal changes size: kubectl (told by SIGWINCH; the pty is not its controlling
        # terminal here) sends a resize message, and the command's pty follows
        fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 132, 0, 0))
        deadline = time.monotonic() + 30
        while b"50 132" not in seen:
            assert time.monotonic() < deadline, seen
            os.kill(proc.pid, signal.SIGWINCH)
            os.write(master, b"stty size\n")
            try:
                read_until(b"50 132", timeout=2)
            except AssertionError:
                pass
        os.write(master, b"exit 7\n")
        assert proc.wait(timeout=30) == 7
    finally:
        proc.kill()
        proc.wait()
        os.close(master)


def test_kubectl_cp_copies_both_ways(cluster, tmp_path):
    _running(cluster)
    local = tmp_path / "local.txt"
    local.write_text("payload\n" * 1000)
    remote_dir = tmp_path / "in-container"
    remote_dir.mkdir()
    cluster.kubectl.run("cp", str(local), f"web:{remote_dir}/copied.txt")
    assert (remote_dir / "copied.txt").read_text() == "payload\n" * 1000
    back = tmp_path / "back.txt"
    cluster.kubectl.run("cp", f"web:{remote_dir}/copied.txt", str(back))
    assert back.read_text() == "payload\n" * 1000


def test_the_official_client_gets_output_and_exit_code(cluster):
    _running(cluster)
    core = cluster.core
    out = stream(core.connect_get_namespaced_pod_exec, "web", "default", command=["sh", "-c", "echo hi"], stderr=True, stdout=True, stdin=False, tty=False)
    assert out == "hi\n"
    ws = stream(
        core.connect_get_namespaced_pod_exec,
        "web",
        "default",
        command=["sh", "-c", "read x; echo got $x; exit 4"],
        stderr=True,
        stdout=True,
        stdin=True,
        tty=False,
        _preload_content=False,
    )
    try:
        ws.write_stdin("value\n")
        ws.run_forever(timeout=30)
        assert ws.read_stdout() == "got value\n"
        assert ws.returncode == 4
    finally:
        ws.close()


def test_a_v4_client_gets_the_status_and_its_hang_up_kills_the_command(cluster, tmp_path):
    """kubernetes_asyncio and kr8s offer only v4.channel.k8s.io (no CLOSE message)."""
    import asyncio
    import json

    import aiohttp

    _running(cluster)
    pidfile = tmp_path / "pid"
    base = cluster.apiserver.url.replace("http", "ws", 1) + "/api/v1/namespaces/default/pods/web/exec"

    async def go() -> None:
        async with aiohttp.ClientSession() as session:
            params = [("command", "sh"), ("command", "-c"), ("command", "read x; echo got $x >&2; exit 2"),
                      ("stdin", "true"), ("stdout", "true"), ("stderr", "true")]
            async with session.ws_connect(base, params=params, protocols=("v4.channel.k8s.io",)) as ws:
                assert ws.protocol == "v4.channel.k8s.io"
                await ws.send_bytes(b"\x00hello\n")
                got: dict[int, bytes] = {}
                async for msg in ws:
                    if msg.type == aiohttp.WSMsgType.BINARY and msg.data:
                        got[msg.data[0]] = got.get(msg.data[0], b"") + msg.data[1:]
                assert got[2] == b"got hello\n"
                assert json.loads(got[3])["details"]["causes"][0]["message"] == "2"
            params = [("command", "sh"), ("command", "-c"), ("command", f"echo $$ > {pidfile}; exec sleep 300"), ("stdout", "true")]
            async with session.ws_connect(base, params=params, protocols=("v4.channel.k8s.io",)) as ws:
                deadline = asyncio.get_running_loop().time() + 30
                while not pidfile.exists() or not pidfile.read_text().strip():
                    assert asyncio.get_running_loop().time() < deadline
                    await asyncio.sleep(0.05)
            pid = int(pidfile.read_text())
            deadline = asyncio.get_running_loop().time() + 30
            while True:  # the hang-up reached the kubelet, which killed the command
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                assert asyncio.get_running_loop().time() < deadline, "the exec'd command outlived its client"
                await asyncio.sleep(0.05)

    asyncio.run(go())


def test_streams_are_counted_as_connect_requests(cluster):
    import urllib.request

    from tests.support.prometheus_text import samples

    _running(cluster)
    cluster.kubectl.run("exec", "web", "--", "true")
    cluster.kubectl.run("logs", "web")
    with urllib.request.urlopen(cluster.apiserver.url + "/metrics", timeout=30) as r:
        text = r.read().decode()
    requests = samples(text, "apiserver_request_total", resource="pods")
    assert {"CONNECT", "GET"} <= {labels["verb"] for labels, _ in requests}
    assert ("CONNECT", "exec") in {(labels["verb"], labels["subresource"]) for labels, _ in requests}
    assert ("GET", "log") in {(labels["verb"], labels["subresource"]) for labels, _ in requests}
