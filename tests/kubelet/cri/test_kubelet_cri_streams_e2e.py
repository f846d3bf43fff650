"""kubectl exec / exec -i / exec -it / attach / port-forward / top on pods that run on containerd (needs root + containerd).

The whole path: kubectl → API server (WebSocket v5, or SPDY tunnelled for port-forward) → the kubelet's server →
CRI Exec/Attach/PortForward → containerd's streaming server (SPDY); and ListContainerStats → /metrics/resource →
metrics.k8s.io for ``kubectl top``.
"""

from __future__ import annotations

import json
import os
import pty
import select
import socket
import subprocess
import time
import urllib.request
from typing import Iterator

import pytest

from tests.kubelet.conftest import Node, node_session
from tests.support.containerd import Containerd
from tests.support.kube import KUBECTL
from tests.support.oci_registry import Registry, busybox_layer, image
from tests.support.terminal import attach_until_echo, pty_session, read_until

pytestmark = pytest.mark.timeout(300)
NS = "cri-streams"


@pytest.fixture(scope="module")
def cri_node(tmp_path_factory, containerd: Containerd) -> Iterator[Node]:
    tmp = str(tmp_path_factory.mktemp("cri-streams-node"))
    extra = ("--container-runtime-endpoint", containerd.endpoint, "--cgroup-root", containerd.cgroup_parent,
             "--runtime-relist-period", "0.3")
    # the pods are containerd's: the containerd fixture removes them
    with node_session(tmp, extra=extra, kill_containers=False) as node:
        node.core.create_namespace({"metadata": {"name": NS}})
        yield node


@pytest.fixture(scope="module")
def ref(registry: Registry) -> str:
    return registry.push("k8py/streams-e2e", "1", image([busybox_layer({"www/index.html": "served inside the pod\n"})]))


def run_pod(node: Node, ref: str, name: str, script: str, *, stdin: bool = False, host_network: bool = False) -> dict:
    node.core.create_namespaced_pod(NS, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"nodeName": "node-1", "terminationGracePeriodSeconds": 0, "hostNetwork": host_network, "containers": [{
            "name": "main", "image": ref, "command": ["/bin/sh", "-c", script], "stdin": stdin}]}})
    return node.wait_pod(NS, name, lambda p: p["status"].get("phase") == "Running", timeout=120, what="Running")


def test_kubectl_exec_output_exit_code_and_stdin(cri_node: Node, ref: str) -> None:
    run_pod(cri_node, ref, "shell", "echo up; exec sleep 3600")
    r = cri_node.kubectl.run("exec", "-n", NS, "shell", "--", "/bin/sh", "-c", "echo out; echo err >&2; cat /proc/1/comm; exit 7",
                             check=False)
    assert (r.returncode, r.stdout, r.stderr.splitlines()[0]) == (7, "out\nsleep\n", "err"), r
    # stdin to the end: kubectl closes it (v5), the runtime's cat reads EOF and the command finishes
    r = cri_node.kubectl.run("exec", "-i", "-n", NS, "shell", "--", "/bin/sh", "-c", "wc -l; echo done", input="a\nb\nc\n")
    assert r.stdout.split() == ["3", "done"], r
    r = cri_node.kubectl.run("exec", "-n", NS, "shell", "--", "/bin/no-such-command", check=False)
    assert r.returncode != 0 and "no-such-command" in r.stderr, r


def test_the_official_clients_exec_stream(cri_node: Node, ref: str) -> None:
    from kubernetes.stream import stream

    cri_node.wait_pod(NS, "shell", lambda p: p["status"].get("phase") == "Running", timeout=120, what="Running")
    out = stream(cri_node.core.connect_get_namespaced_pod_exec, "shell", NS, command=["sh", "-c", "echo hi"],
                 stderr=True, stdout=True, stdin=False, tty=False)
    assert out == "hi\n"
    ws = stream(cri_node.core.connect_get_namespaced_pod_exec, "shell", NS, command=["sh", "-c", "read x; echo got $x; exit 4"],
                stderr=True, stdout=True, stdin=True, tty=False, _preload_content=False)
    try:
        ws.write_stdin("value\n")
        ws.run_forever(timeout=60)
        assert ws.read_stdout() == "got value\n" and ws.returncode == 4
    finally:
        ws.close()


def test_kubectl_exec_with_a_terminal(cri_node: Node, ref: str) -> None:
    run_pod(cri_node, ref, "tty", "exec sleep 3600")
    proc, master = pty_session(["exec", "-it", "-n", NS, "tty", "--", "/bin/sh"], cri_node.kubectl.env)
    try:
        os.write(master, b"test -t 1 && echo TTY-$((6*7))\n")  # the answer, not the echoed line, says 42
        seen = read_until(master, proc, b"", lambda s: b"TTY-42" in s, timeout=60)
        # the terminal's size travels on kubectl's resize stream, in no set order with stdin, and
        # containerd starts the command before it applies a resize: ask until it has arrived
        deadline = time.monotonic() + 30
        while b"40 120" not in seen and time.monotonic() < deadline:
            os.write(master, b"busybox stty size\n")
            seen = read_until(master, proc, seen, lambda s: b"40 120" in s, timeout=2)
        os.write(master, b"exit 9\n")
        seen = read_until(master, proc, seen, lambda s: False, timeout=60)  # until kubectl is done
        assert proc.wait(timeout=30) == 9, seen
        assert b"TTY-42" in seen and b"40 120" in seen, seen
    finally:
        proc.kill()
        proc.wait()
        os.close(master)


def test_kubectl_attach_with_stdin(cri_node: Node, ref: str) -> None:
    run_pod(cri_node, ref, "echoer", "while read line; do echo got: $line; done", stdin=True)
    assert attach_until_echo(cri_node.kubectl, NS, "echoer", timeout=60) == "got: ping\n"


def test_kubectl_attach_follows_the_output(cri_node: Node, ref: str) -> None:
    run_pod(cri_node, ref, "ticker", "i=0; while true; do i=$((i+1)); echo tick $i; sleep 0.2; done")
    proc = subprocess.Popen([KUBECTL, "attach", "ticker", "-n", NS], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=cri_node.kubectl.env, text=True)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(3)]
        numbers = [int(line.split()[1]) for line in lines]
        assert all(line.startswith("tick ") for line in lines) and numbers == sorted(numbers), lines
    finally:
        proc.kill()
        proc.wait()


def test_kubectl_attach_to_a_terminal_container(cri_node: Node, ref: str) -> None:
    cri_node.core.create_namespaced_pod(NS, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "console"},
        "spec": {"nodeName": "node-1", "terminationGracePeriodSeconds": 0, "restartPolicy": "Never", "containers": [{
            "name": "main", "image": ref, "command": ["/bin/sh"], "stdin": True, "stdinOnce": True, "tty": True}]}})
    cri_node.wait_pod(NS, "console", lambda p: p["status"].get("phase") == "Running", timeout=120, what="Running")
    master, slave = pty.openpty()
    proc = subprocess.Popen([KUBECTL, "attach", "-it", "-n", NS, "console"], stdin=slave, stdout=slave, stderr=slave,
                            env=cri_node.kubectl.env, close_fds=True)
    os.close(slave)
    seen = b""
    try:
        deadline = time.monotonic() + 60
        while b"ATTACHED-TTY" not in seen and proc.poll() is None and time.monotonic() < deadline:
            os.write(master, b"test -t 0 && echo ATTACHED-$(echo TTY)\n")  # until the shell's terminal is attached
            if select.select([master], [], [], 1.0)[0]:
                try:
                    seen += os.read(master, 4096)
                except OSError:
                    break
        assert b"ATTACHED-TTY" in seen, seen
        os.write(master, b"exit 3\n")
        proc.wait(timeout=60)
    finally:
        proc.kill()
        proc.wait()
        os.close(master)
    done = cri_node.wait_pod(NS, "console", lambda p: p["status"].get("phase") == "Failed", timeout=120, what="Failed")
    assert done["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3


def test_kubectl_port_forward_to_the_pods_localhost(cri_node: Node, ref: str) -> None:
    # bound to 127.0.0.1 inside the pod: only the runtime's PortForward (in the pod's netns) reaches it
    run_pod(cri_node, ref, "web", "exec httpd -f -p 127.0.0.1:8080 -h /www")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        local = s.getsockname()[1]
    proc = cri_node.kubectl.popen("port-forward", "-n", NS, "pod/web", f"{local}:8080")
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith(f"Forwarding from 127.0.0.1:{local} -> 8080")
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{local}/index.html", timeout=30) as resp:
                    body = resp.read()
                break
            except OSError:  # httpd may not listen yet
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
        assert body == b"served inside the pod\n"
        for _ in range(2):
            with urllib.request.urlopen(f"http://127.0.0.1:{local}/index.html", timeout=30) as resp:
                assert resp.read() == b"served inside the pod\n"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_kubectl_top_pod_reads_the_runtimes_stats(cri_node: Node, ref: str) -> None:
    run_pod(cri_node, ref, "burner", "while true; do i=0; while [ $i -lt 300 ]; do i=$((i+1)); done; sleep 0.01; done")
    deadline = time.monotonic() + 90
    while True:  # the first scrape has no rate yet; containerd measures a new container after a moment
        r = cri_node.kubectl.run("top", "pod", "burner", "-n", NS, check=False)
        lines = r.stdout.splitlines()
        if r.returncode == 0 and len(lines) > 1 and lines[1].split()[1] not in ("0m",):
            break
        assert time.monotonic() < deadline, r
        time.sleep(1)
    name, cpu, memory = lines[1].split()
    assert name == "burner" and cpu.endswith("m") and int(cpu[:-1]) > 0 and memory.endswith("Mi"), lines
    raw = cri_node.kubectl.run("get", "--raw", "/api/v1/nodes/node-1/proxy/metrics/resource").stdout
    assert 'container_memory_working_set_bytes{container="main",namespace="cri-streams",pod="burner"}' in raw, raw


def test_stats_summary_has_the_pods_network_from_the_runtime(cri_node: Node, ref: str, containerd: Containerd) -> None:
    pod = run_pod(cri_node, ref, "talker", "exec httpd -f -p 8080 -h /www")
    deadline = time.monotonic() + 60
    while True:  # traffic on the pod's own interface: the node fetches from its pod IP over the bridge
        try:
            with urllib.request.urlopen(f"http://{pod['status']['podIP']}:8080/index.html", timeout=30) as resp:
                assert resp.read() == b"served inside the pod\n"
            break
        except OSError:
            assert time.monotonic() < deadline, "the pod's server never answered on its pod IP"
            time.sleep(0.3)
    deadline = time.monotonic() + 60
    while True:
        summary = json.loads(cri_node.kubectl.run("get", "--raw", "/api/v1/nodes/node-1/proxy/stats/summary").stdout)
        stats = next((p for p in summary["pods"] if p["podRef"]["name"] == "talker"), {})
        if stats.get("network", {}).get("txBytes", 0) > 0:
            break
        assert time.monotonic() < deadline, stats
        time.sleep(0.5)
    net = stats["network"]
    assert net["name"] == "eth0" and net["rxBytes"] > 0 and net["interfaces"][0]["name"] == "eth0", net
    assert stats["containers"][0]["name"] == "main" and stats["containers"][0]["memory"]["workingSetBytes"] > 0, stats
    # the node's filesystem, and containerd's image filesystem (ImageFsInfo's, below its own root) as upstream's runtime.imageFs
    node_fs, image_fs = summary["node"]["fs"], summary["node"]["runtime"]["imageFs"]
    for fs in (node_fs, image_fs):
        assert 0 < fs["availableBytes"] <= fs["capacityBytes"] and fs["inodes"] >= fs["inodesFree"] > 0, fs
    root = os.statvfs(containerd.layout.home)
    assert image_fs["capacityBytes"] == root.f_blocks * root.f_frsize, (image_fs, containerd.layout.home)


def interfaces(proc_net_dev: str) -> set[str]:
    return {line.split(":")[0].strip() for line in proc_net_dev.splitlines()[2:]}


def test_a_host_network_pod_shares_the_nodes_network(cri_node: Node, ref: str) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    pod = run_pod(cri_node, ref, "hostnet", f"exec httpd -f -p 127.0.0.1:{port} -h /www", host_network=True)
    assert pod["status"]["podIP"] == "127.0.0.1", pod["status"]  # the node's address (the kubelet's --address)
    inside = cri_node.kubectl.run("exec", "-n", NS, "hostnet", "--", "cat", "/proc/net/dev").stdout
    with open("/proc/net/dev") as f:
        assert interfaces(inside) == interfaces(f.read())  # the node's interfaces, not a pod netns's lo + eth0
    deadline = time.monotonic() + 60
    while True:  # the pod's server, reached on the node's loopback with no forwarding at all
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/index.html", timeout=30) as resp:
                assert resp.read() == b"served inside the pod\n"
            break
        except OSError:
            assert time.monotonic() < deadline, "the hostNetwork pod's server never answered on the node"
            time.sleep(0.3)
    cri_node.core.delete_namespaced_pod("hostnet", NS, grace_period_seconds=0)
    cri_node.wait_gone(NS, "hostnet", timeout=120)


def test_a_client_that_hangs_up_ends_stdin_but_leaves_the_command_running_as_upstream(cri_node: Node, ref: str) -> None:
    # upstream's kubelet on containerd does the same (kubernetes/kubernetes#89031, containerd/cri#1256): the
    # session's end closes the command's stdin and nothing more; a command that does not read it runs on
    cri_node.wait_pod(NS, "shell", lambda p: p["status"].get("phase") == "Running", timeout=120, what="Running")
    scripts = {"reader": "echo $$ > /tmp/hangup-reader; exec cat", "sleeper": "echo $$ > /tmp/hangup-sleeper; exec sleep 300"}
    clients = {name: subprocess.Popen([KUBECTL, "exec", "-i", "-n", NS, "shell", "--", "/bin/sh", "-c", script],
                                      stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=cri_node.kubectl.env)
               for name, script in scripts.items()}
    try:
        pids = {}
        deadline = time.monotonic() + 60
        while len(pids) < 2 and time.monotonic() < deadline:
            for name in scripts:
                r = cri_node.kubectl.run("exec", "-n", NS, "shell", "--", "cat", f"/tmp/hangup-{name}", check=False)
                if r.returncode == 0 and r.stdout.strip():
                    pids[name] = r.stdout.strip()
            time.sleep(0.2)
        assert len(pids) == 2, pids
        for proc in clients.values():
            proc.kill()  # the client hangs up without closing stdin
            proc.wait()

        def alive(pid: str) -> bool:
            return cri_node.kubectl.run("exec", "-n", NS, "shell", "--", "test", "-d", f"/proc/{pid}", check=False).returncode == 0

        deadline = time.monotonic() + 60
        while alive(pids["reader"]) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not alive(pids["reader"]), "the reader's stdin was not closed when its client went away"
        assert alive(pids["sleeper"]), "the command that does not read stdin should run on, as upstream's does"
    finally:
        for proc in clients.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        cri_node.kubectl.run("exec", "-n", NS, "shell", "--", "/bin/sh", "-c", "pkill -f 'sleep 300'; true", check=False)
