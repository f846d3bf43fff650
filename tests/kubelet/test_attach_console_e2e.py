"""e2e: attach's stdin and terminal as upstream — ``stdinOnce``, and a terminal that outlives a kubelet restart.

A real API server and ``k8py kubelet`` (the process runtime), driven by the real kubectl:

- ``kubectl run -i`` makes a ``stdin: true, stdinOnce: true`` pod and attaches; when that
  attach's stdin ends the container reads EOF, and a later attach gets no stdin;
- ``kubectl attach -it`` ends when its stdin ends, the container and its terminal running on;
- a ``tty: true`` container keeps its terminal when the kubelet restarts and adopts it
  (the runtime's console holder keeps the pty master): ``kubectl attach -it`` still works
  and the session still reaches the container's log.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import struct
import subprocess
import termios
import time
from typing import Callable

from tests.kubelet.conftest import Node, phase, pod_manifest, ready, start_node
from tests.support.kube import KUBECTL, official_client
from tests.support.kubelet import KubeletProcess


def _env(node: Node) -> dict[str, str]:
    return {**os.environ, "HOME": node.kubectl.home, "KUBECONFIG": node.kubectl.kubeconfig}


def _read_until(fd: int, proc: subprocess.Popen[bytes], seen: bytes, done: Callable[[bytes], bool], timeout: float = 60) -> bytes:
    deadline = time.monotonic() + timeout
    while not done(seen) and time.monotonic() < deadline:
        if select.select([fd], [], [], 0.5)[0]:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    return seen


def test_kubectl_run_i_feeds_stdin_once_and_the_container_reads_eof(node: Node, ns: str) -> None:
    overrides = json.dumps({"spec": {"nodeName": node.kubelet.node_name}})
    out = node.kubectl.run("run", "-i", "--restart=Never", "--image=busybox", "-n", ns, "once", "--overrides", overrides,
                           "--", "sh", "-c", "read a; echo got $a; read b || echo eof-after-$a", input="hi\n", timeout=120)
    assert "got hi" in out.stdout and "eof-after-hi" in out.stdout, (out.stdout, out.stderr)
    spec = node.pod(ns, "once")["spec"]["containers"][0]
    assert spec["stdin"] is True and spec["stdinOnce"] is True
    node.wait_pod(ns, "once", phase("Succeeded"), what="Succeeded")
    # and with --rm: kubectl deletes the pod once the attach is over
    out = node.kubectl.run("run", "-i", "--rm", "--restart=Never", "--image=busybox", "-n", ns, "gone", "--overrides", overrides,
                           "--", "sh", "-c", "read a; echo got $a", input="bye\n", timeout=120)
    assert "got bye" in out.stdout and 'pod "gone" deleted' in out.stdout + out.stderr, (out.stdout, out.stderr)
    node.wait_gone(ns, "gone")


def test_a_later_attach_to_a_stdin_once_container_gets_no_stdin(node: Node, ns: str) -> None:
    script = "read a; echo got $a; read b || echo eof; while sleep 0.3; do read c && echo late $c; echo tick; done"
    node.core.create_namespaced_pod(ns, pod_manifest("keeper", [{"name": "main", "image": "busybox", "command": ["sh", "-c", script],
                                                                  "stdin": True, "stdinOnce": True}]))
    node.wait_pod(ns, "keeper", ready, what="Ready")
    first = subprocess.Popen([KUBECTL, "attach", "-i", "keeper", "-n", ns], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, env=_env(node))
    try:
        assert first.stdin is not None and first.stdout is not None
        first.stdin.write(b"one\n")
        first.stdin.close()  # the first attach's stdin ends: the container reads EOF next
        seen = _read_until(first.stdout.fileno(), first, b"", lambda s: b"eof" in s)
        assert b"got one" in seen and b"eof" in seen, seen
    finally:
        first.kill()
        first.wait()
    second = subprocess.Popen([KUBECTL, "attach", "-i", "keeper", "-n", ns], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, env=_env(node))
    try:
        assert second.stdin is not None and second.stdout is not None
        seen = _read_until(second.stdout.fileno(), second, b"", lambda s: b"tick" in s)
        assert b"tick" in seen, seen  # the second attach is live: it streams the container's output
        second.stdin.write(b"two\n")
        second.stdin.flush()
        seen = _read_until(second.stdout.fileno(), second, seen, lambda s: s.count(b"tick") >= 8 or b"late" in s)
        assert seen.count(b"tick") >= 8 and b"late" not in seen, seen
    finally:
        second.kill()
        second.wait()
    assert "late" not in node.kubectl.run("logs", "keeper", "-n", ns).stdout


def test_attach_to_a_plain_stdin_container_ends_with_its_stdin_and_the_container_runs_on(node: Node, ns: str) -> None:
    # not stdinOnce: the container's stdin stays open for the next attach, and an attach whose
    # stdin ends returns then (containerd's attach does), instead of waiting for the container
    node.core.create_namespaced_pod(ns, pod_manifest("echoer", [{"name": "main", "image": "busybox", "stdin": True,
                                                                  "command": ["sh", "-c", "while read l; do echo got: $l; done; echo eof"]}]))
    node.wait_pod(ns, "echoer", ready, what="Ready")
    for word in ("one", "two"):
        node.kubectl.run("attach", "-i", "echoer", "-n", ns, input=f"{word}\n", timeout=60)
    deadline = time.monotonic() + 30
    logs = ""
    while "got: two" not in logs and time.monotonic() < deadline:
        logs = node.kubectl.run("logs", "echoer", "-n", ns).stdout
        time.sleep(0.2)
    assert "got: one" in logs and "got: two" in logs and "eof" not in logs, logs
    assert node.pod(ns, "echoer")["status"]["containerStatuses"][0]["restartCount"] == 0


def test_attach_it_ends_when_the_clients_stdin_ends_and_the_terminal_stays_the_containers(node: Node, ns: str) -> None:
    # upstream (containerd's attach): a tty attach whose stdin ends is over; the container and its
    # terminal run on. kubectl's stdin is a terminal (so -t holds) whose other side then goes away,
    # its output a pipe to read what the container's terminal shows
    node.core.create_namespaced_pod(ns, pod_manifest("term", [{"name": "main", "image": "busybox", "command": ["sh"],
                                                                "stdin": True, "tty": True}]))
    node.wait_pod(ns, "term", ready, what="Ready")
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 90, 0, 0))
    proc = subprocess.Popen([KUBECTL, "attach", "-it", "term", "-n", ns], stdin=slave, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=_env(node), start_new_session=True)
    os.close(slave)
    try:
        assert proc.stdout is not None
        seen = _read_until(proc.stdout.fileno(), proc, b"", lambda s: b"If you don't see a command prompt" in s)
        deadline = time.monotonic() + 60
        while b"ATTACHED-42" not in seen and time.monotonic() < deadline:
            os.write(master, b"echo ATTACHED-$((6*7))\n")
            seen = _read_until(proc.stdout.fileno(), proc, seen, lambda s: b"ATTACHED-42" in s, timeout=3)
        assert b"ATTACHED-42" in seen, seen
        os.close(master)  # kubectl's stdin ends (EIO): it closes the session's stdin stream
        master = -1
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"kubectl attach -it still ran 30 s after its stdin ended: {seen!r}") from None
        assert code == 0, seen + proc.stdout.read()
    finally:
        proc.kill()
        proc.wait()
        if master >= 0:
            os.close(master)
    status = node.pod(ns, "term")["status"]["containerStatuses"][0]
    assert "running" in status["state"] and status["restartCount"] == 0, status
    # and the container still runs (its shell did not read an end of input)
    out = node.kubectl.run("exec", "term", "-n", ns, "--", "sh", "-c", "echo alive", timeout=60)
    assert out.stdout == "alive\n"


def test_attach_it_reaches_a_terminal_the_restarted_kubelet_adopted(tmp_path) -> None:
    server, kubelet, kubectl = start_node(str(tmp_path))
    api = official_client(server.url)
    node = Node(server, kubelet, kubectl, api)
    second: KubeletProcess | None = None
    try:
        node.core.create_namespaced_pod("default", pod_manifest("term", [{"name": "main", "image": "busybox", "command": ["sh"],
                                                                          "stdin": True, "tty": True}]))
        # and a stdinOnce container nobody attached to yet: its stdin must stay open across the restart
        node.core.create_namespaced_pod("default", pod_manifest("waiter", [{"name": "main", "image": "busybox", "stdin": True,
                                                                            "stdinOnce": True, "command": ["sh", "-c", "read a; echo got-$a"]}],
                                                                restartPolicy="Never"))
        before = node.wait_pod("default", "term", ready, what="Ready")["status"]["containerStatuses"][0]
        node.wait_pod("default", "waiter", ready, what="Ready")
        kubelet.stop()  # SIGTERM: the kubelet goes, the containers and their console holders stay
        second = KubeletProcess(kubelet.kubeconfig, kubelet.root_dir, node_name="node-1").start()
        node.kubelet = second
        out = kubectl.run("attach", "-i", "waiter", "-n", "default", input="late\n", timeout=120)
        assert "got-late" in out.stdout, (out.stdout, out.stderr)  # it had not read EOF while the kubelet was away
        node.wait_pod("default", "waiter", phase("Succeeded"), what="Succeeded")

        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 90, 0, 0))
        proc = subprocess.Popen([KUBECTL, "attach", "-it", "term", "-n", "default"], stdin=slave, stdout=slave, stderr=slave,
                                env=_env(node), start_new_session=True)
        os.close(slave)
        try:
            seen = _read_until(master, proc, b"", lambda s: b"If you don't see a command prompt" in s)
            deadline = time.monotonic() + 60
            while b"ADOPTED-42" not in seen and time.monotonic() < deadline:
                os.write(master, b"test -t 0 && echo ADOPTED-$((6*7))\n")
                seen = _read_until(master, proc, seen, lambda s: b"ADOPTED-42" in s, timeout=3)
            assert b"ADOPTED-42" in seen, seen
            # kubectl sends the terminal's size on its resize stream beside stdin, in no set order (as
            # client-go's resize queue): a command typed at once may run before the size arrives
            deadline = time.monotonic() + 30
            while b"30 90" not in seen and time.monotonic() < deadline:
                os.write(master, b"stty size\n")
                seen = _read_until(master, proc, seen, lambda s: b"30 90" in s, timeout=2)
            assert b"30 90" in seen, seen  # the client's size reached the adopted terminal
            os.write(master, b"exit 4\n")
            assert proc.wait(timeout=60) == 0
        finally:
            proc.kill()
            proc.wait()
            os.close(master)
        # the session went into the container's log through the adopted terminal too
        assert "ADOPTED-42" in kubectl.run("logs", "term", "-n", "default", "-c", "main", "--previous", check=False).stdout + \
            kubectl.run("logs", "term", "-n", "default", "-c", "main", check=False).stdout
        pod = node.wait_pod("default", "term", lambda p: (p["status"]["containerStatuses"][0].get("lastState") or {}).get("terminated"))
        status = pod["status"]["containerStatuses"][0]
        assert status["lastState"]["terminated"]["exitCode"] == 4, status
        assert status["lastState"]["terminated"]["containerID"] == before["containerID"], (before, status)
    finally:
        for k in (second, kubelet):
            if k is not None:
                k.stop()
                k.kill_containers()
        api.close()
        server.stop()
