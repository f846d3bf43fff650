"""e2e: SIGTERM stops a busy kubelet promptly, its streams cut and its containers left running.

The streams a kubelet serves never end on their own; aiohttp's default shutdown
waited 60 s for each open one (then as long again for its cancellation), so a
kubelet with a ``kubectl port-forward`` open took over a minute to stop.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import time

from k8py.kubelet.runtime.process.records import is_same_process
from tests.kubelet.conftest import node_session, phase, pod_manifest

#: far above what stopping takes (about 2 s: the servers' grace), far below the 60 s a stream held it
STOP_LIMIT = 15.0


def _running_exec_pids(marker: str) -> list[int]:
    """The processes whose whole command line is ``marker`` (not kubectl's, which carries it too)."""
    out = subprocess.run(["pgrep", "-f", f"^{marker}$"], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def test_sigterm_stops_a_kubelet_with_open_streams_within_seconds_and_leaves_its_containers(tmp_path) -> None:
    with node_session(str(tmp_path)) as node:
        node.core.create_namespaced_pod("default", pod_manifest("ticker", [
            {"name": "c", "image": "busybox", "command": ["sh", "-c", "while true; do echo tick; sleep 0.2; done"]}]))
        node.core.create_namespaced_pod("default", pod_manifest("web", [{"name": "c", "image": "nginx", "ports": [{"containerPort": 80}]}]))
        node.wait_pod("default", "ticker", phase("Running"), what="ticker Running")
        node.wait_pod("default", "web", phase("Running"), what="web Running")
        records = [r for r in node.kubelet.container_records() if r["state"] == "CONTAINER_RUNNING"]
        assert len(records) == 2, records

        marker = f"sleep 4{time.monotonic_ns() % 1000:03d}"  # names this test's exec'd command among the machine's processes
        clients = [node.kubectl.popen("logs", "-f", "ticker"), node.kubectl.popen("exec", "ticker", "--", *marker.split()),
                   node.kubectl.popen("port-forward", "pod/web", ":80")]
        held: socket.socket | None = None
        try:
            assert clients[0].stdout.readline() == "tick\n"
            line = clients[2].stdout.readline()
            assert "Forwarding from 127.0.0.1:" in line, line + clients[2].stderr.read()
            held = socket.create_connection(("127.0.0.1", int(line.split(":")[1].split()[0])), timeout=30)
            held.sendall(b"GET / HTTP/1.1\r\nHost: web\r\n\r\n")
            answer = held.recv(12)
            assert answer.startswith(b"HTTP/1.") and answer.endswith(b" 200"), answer
            deadline = time.monotonic() + 60
            while not _running_exec_pids(marker) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert _running_exec_pids(marker), "the exec'd command runs"

            started = time.monotonic()
            node.kubelet.proc.send_signal(signal.SIGTERM)
            try:
                code = node.kubelet.proc.wait(STOP_LIMIT)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"the kubelet still ran {STOP_LIMIT} s after SIGTERM:\n{node.log_tail()}") from None
            took = time.monotonic() - started
            assert code == 0, node.log_tail()
            print(f"kubelet with 3 open streams stopped {took:.2f}s after SIGTERM")

            # the streams were cut, not left hanging: kubectl logs -f ends
            assert clients[0].wait(30) is not None
            # the exec'd command ended with its stream (it was the kubelet's child, not the container's)
            deadline = time.monotonic() + 30
            while _running_exec_pids(marker) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not _running_exec_pids(marker), "the exec'd command outlived the kubelet"
            # and the containers run on, for the next kubelet to adopt
            for rec in records:
                assert is_same_process(rec["pid"], rec["start_ticks"]), f"container {rec['name']} of {rec['pod_uid']} was stopped"
        finally:
            if held is not None:
                held.close()
            for c in clients:
                if c.poll() is None:
                    c.kill()
                c.wait(10)
