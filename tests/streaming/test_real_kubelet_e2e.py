"""e2e: logs, exec, cp, attach, port-forward and top against a real kubelet process.

A real API server and ``k8py kubelet`` (the process runtime: bwrap where
available, CRI log files written by the runtime), driven by the real kubectl.
Pods are bound by ``spec.nodeName``; each test uses its own namespace.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import struct
import termios
import time
import urllib.request
from typing import Iterator

import pytest

from tests.kubelet.conftest import Node, node_session, pod_manifest, ready
from tests.support.terminal import attach_until_echo, pty_session, read_until

_count = iter(range(10_000))


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> Iterator[Node]:
    with node_session(str(tmp_path_factory.mktemp("streaming-node"))) as n:
        yield n


@pytest.fixture
def ns(node: Node) -> str:
    name = f"s{next(_count)}-{int(time.time() * 1000) % 100000}"
    node.core.create_namespace({"metadata": {"name": name}})
    return name


def _run(node: Node, ns: str, name: str, command: str, **container: object) -> dict:
    node.core.create_namespaced_pod(ns, pod_manifest(name, [{"name": "main", "image": "busybox", "command": ["sh", "-c", command], **container}]))
    return node.wait_pod(ns, name, ready, what="Ready")


def _wait_output(node: Node, ns: str, name: str, text: str, *args: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    out = ""
    while time.monotonic() < deadline:
        out = node.kubectl.run("logs", name, "-n", ns, *args, check=False).stdout
        if text in out:
            return out
        time.sleep(0.2)
    raise AssertionError(f"{text!r} never appeared in the logs of {ns}/{name}: {out!r}")


def test_logs_of_a_running_container(node: Node, ns: str) -> None:
    _run(node, ns, "talker", "echo hello; echo oops >&2; i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.2; done")
    out = _wait_output(node, ns, "talker", "tick 3")
    lines = out.splitlines()
    # stdout and stderr reach the file through separate pipes: their relative order is not kept
    assert "oops" in lines
    assert [line for line in lines if line != "oops"][:3] == ["hello", "tick 0", "tick 1"]
    tail = node.kubectl.run("logs", "talker", "-n", ns, "--tail=1", "--timestamps").stdout.splitlines()
    assert len(tail) == 1 and tail[0].split(" ", 1)[1].startswith("tick ") and tail[0].split(" ")[0].endswith("Z")
    assert node.kubectl.run("logs", "talker", "-n", ns, "--since=1h").stdout.startswith("hello\n")
    follow = node.kubectl.popen("logs", "-f", "--tail=1", "talker", "-n", ns)
    try:
        assert follow.stdout is not None
        first = int(follow.stdout.readline().split()[1])
        second = int(follow.stdout.readline().split()[1])
        assert second == first + 1  # new lines arrive as the container writes them
    finally:
        follow.kill()
        follow.wait()


def test_logs_previous_after_a_restart(node: Node, ns: str) -> None:
    node.core.create_namespaced_pod(ns, pod_manifest("crasher", [{"name": "main", "image": "busybox",
                                                                    "command": ["sh", "-c", "echo run at $(date +%s%N); sleep 0.5; exit 1"]}]))
    node.wait_pod(ns, "crasher", lambda p: any(c.get("restartCount", 0) >= 1 for c in (p.get("status") or {}).get("containerStatuses") or []),
                  what="restarted")
    previous = node.kubectl.run("logs", "crasher", "-n", ns, "--previous").stdout
    assert previous.startswith("run at ") and previous.count("\n") == 1


def test_exec_exit_codes_stdin_and_a_terminal(node: Node, ns: str) -> None:
    _run(node, ns, "shell", "sleep 3600")
    result = node.kubectl.run("exec", "shell", "-n", ns, "--", "sh", "-c", "echo out; echo err >&2; exit 5", check=False)
    assert (result.returncode, result.stdout) == (5, "out\n")
    assert "err\n" in result.stderr and "command terminated with exit code 5" in result.stderr
    assert node.kubectl.run("exec", "-i", "shell", "-n", ns, "--", "cat", input="piped\n").stdout == "piped\n"
    missing = node.kubectl.run("exec", "shell", "-n", ns, "--", "/no/such/binary", check=False)
    assert missing.returncode in (126, 127)

    proc, master = pty_session(["exec", "-it", "shell", "-n", ns, "--", "sh"], node.kubectl.env)
    try:
        # type only once the shell prompts: kubectl has put the terminal in raw mode by then
        seen = read_until(master, proc, b"", lambda s: s.rstrip().endswith((b"#", b"$")))
        os.write(master, b"test -t 1 && echo TTY-$((6*7))\n")  # the answer, not the echoed line, says 42
        seen = read_until(master, proc, seen, lambda s: b"TTY-42" in s)
        # the terminal's size travels on kubectl's resize stream, in no set order with stdin, and
        # the command starts before any resize (as upstream): ask until it has arrived
        deadline = time.monotonic() + 30
        while b"40 120" not in seen and time.monotonic() < deadline:
            os.write(master, b"stty size\n")
            seen = read_until(master, proc, seen, lambda s: b"40 120" in s, timeout=2)
        os.write(master, b"exit 9\n")
        seen = read_until(master, proc, seen, lambda s: False)  # until kubectl is done
        assert proc.wait(timeout=30) == 9, seen
        assert b"TTY-42" in seen and b"40 120" in seen
    finally:
        proc.kill()
        proc.wait()
        os.close(master)


def test_kubectl_cp_into_and_out_of_a_container(node: Node, ns: str, tmp_path) -> None:
    _run(node, ns, "files", "mkdir -p /tmp/box; sleep 3600")
    local = tmp_path / "data.txt"
    local.write_text("copied through exec and tar\n" * 500)
    node.kubectl.run("cp", str(local), f"{ns}/files:/tmp/box/data.txt")
    inside = node.kubectl.run("exec", "files", "-n", ns, "--", "wc", "-l", "/tmp/box/data.txt").stdout
    assert inside.split()[0] == "500"
    back = tmp_path / "back.txt"
    node.kubectl.run("cp", f"{ns}/files:/tmp/box/data.txt", str(back))
    assert back.read_text() == local.read_text()


def test_attach_to_a_container_with_stdin(node: Node, ns: str) -> None:
    _run(node, ns, "echoer", "while read line; do echo got: $line; done", stdin=True)
    assert attach_until_echo(node.kubectl, ns, "echoer") == "got: ping\n"
    assert "got: ping" in node.kubectl.run("logs", "echoer", "-n", ns).stdout


def test_port_forward_to_the_builtin_nginx(node: Node, ns: str) -> None:
    node.core.create_namespaced_pod(ns, pod_manifest("web", [{"name": "nginx", "image": "nginx:1.27", "ports": [{"containerPort": 80}],
                                                               "readinessProbe": {"tcpSocket": {"port": 80}, "periodSeconds": 1}}]))
    node.wait_pod(ns, "web", ready, what="Ready")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        local = s.getsockname()[1]
    proc = node.kubectl.popen("port-forward", "-n", ns, "pod/web", f"{local}:80")
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith(f"Forwarding from 127.0.0.1:{local} -> 80")
        for _ in range(2):
            with urllib.request.urlopen(f"http://127.0.0.1:{local}/", timeout=30) as resp:
                assert b"Welcome to nginx!" in resp.read()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_top_pods_and_nodes(node: Node, ns: str) -> None:
    _run(node, ns, "burner", "while true; do i=0; while [ $i -lt 300 ]; do i=$((i+1)); done; sleep 0.01; done")
    out = node.kubectl.run("top", "pod", "burner", "-n", ns).stdout.splitlines()
    name, cpu, memory = out[1].split()
    assert name == "burner" and cpu.endswith("m") and memory.endswith("Mi")
    assert int(cpu[:-1]) > 0
    nodes = node.kubectl.run("top", "nodes").stdout.splitlines()
    assert nodes[1].split()[0] == "node-1"
    summary = json.loads(node.kubectl.run("get", "--raw", "/api/v1/nodes/node-1/proxy/stats/summary").stdout)
    assert any(p["podRef"]["name"] == "burner" for p in summary["pods"])


def test_attach_it_to_a_container_with_its_own_terminal(node: Node, ns: str) -> None:
    # the container's shell runs on a pty the runtime allocated: it is a terminal, and sees the client's size
    _run(node, ns, "term", "sh", stdin=True, tty=True)
    proc, master = pty_session(["attach", "-it", "term", "-n", ns], node.kubectl.env)
    try:
        seen = read_until(master, proc, b"", lambda s: b"If you don't see a command prompt" in s)
        os.write(master, b"test -t 0 && echo TTY-$((6*7))\n")
        seen = read_until(master, proc, seen, lambda s: b"TTY-42" in s)
        assert b"TTY-42" in seen, seen
        # kubectl sends the terminal's size on its resize stream beside stdin, in no set order (as
        # client-go's resize queue): a command typed at once may see the size before it arrives
        deadline = time.monotonic() + 30
        while b"40 120" not in seen and time.monotonic() < deadline:
            os.write(master, b"stty size\n")
            seen = read_until(master, proc, seen, lambda s: b"40 120" in s, timeout=2)
        assert b"40 120" in seen, seen
        # a resize of the client's terminal reaches the container's
        fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 100, 0, 0))
        os.kill(proc.pid, 28)  # SIGWINCH: as the terminal emulator would
        deadline = time.monotonic() + 30
        while b"50 100" not in seen and time.monotonic() < deadline:
            os.write(master, b"stty size\n")
            seen = read_until(master, proc, seen, lambda s: b"50 100" in s, timeout=2)
        assert b"50 100" in seen, seen
        # the session is in the container's log too, as one stdout stream
        assert "TTY-42" in node.kubectl.run("logs", "term", "-n", ns).stdout
        os.write(master, b"exit 3\n")
        assert proc.wait(timeout=30) == 0  # attach ends with the container; its exit code is the pod's business
    finally:
        proc.kill()
        proc.wait()
        os.close(master)
    pod = node.wait_pod(ns, "term", lambda p: (p["status"]["containerStatuses"][0].get("lastState") or {}).get("terminated"))
    assert pod["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"] == 3, pod["status"]


def test_kubectl_run_it_rm_runs_a_shell_and_deletes_the_pod(node: Node, ns: str) -> None:
    proc, master = pty_session(["run", "-it", "--rm", "--restart=Never", "--image=busybox", "-n", ns, "shell",
                                 "--overrides", json.dumps({"spec": {"nodeName": node.kubelet.node_name}}), "--", "sh"], node.kubectl.env)
    try:
        # the shell printed its prompt before kubectl attached (hence kubectl's hint, as upstream): the
        # hint or a prompt says the terminal is attached
        seen = read_until(master, proc, b"", lambda s: b"try pressing enter" in s or s.rstrip().endswith((b"#", b"$")), timeout=60)
        os.write(master, b"echo IN-$((40+2)); exit\n")
        seen = read_until(master, proc, seen, lambda s: False, timeout=60)  # until kubectl is done
        assert proc.wait(timeout=60) == 0, seen
        assert b"IN-42" in seen and b'pod "shell" deleted' in seen, seen
    finally:
        proc.kill()
        proc.wait()
        os.close(master)
    node.wait_gone(ns, "shell")
