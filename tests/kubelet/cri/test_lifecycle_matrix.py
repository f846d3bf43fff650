"""The pod lifecycle matrix of tests/kubelet/test_lifecycle_e2e.py, on containerd through ``k8py up --runtime containerd``.

The same cases, observed the same way (files on a hostPath volume, status,
Events): init containers in order, a sidecar, postStart and preStop hooks,
termination order, CrashLoopBackOff doubling, a liveness probe restarting,
readiness flapping, SIGTERM handled and grace expiry ending in SIGKILL, gRPC
readiness probes, a force-deleted pod's container stopped — plus restart
policies and HTTP/TCP probes against the pod's own IP. What differs is only
what containerd needs: images are the locally imported ``busybox:1.35``
(a tag, so imagePullPolicy is IfNotPresent), the gRPC server's Python comes
from the host through read-only hostPath volumes (the busybox image has no
Python), and the force-deleted container is checked through CRI (the
process runtime's test reads its own records).

The kubelet runs with ``--backoff-base 1 --backoff-max 8`` (the config
file's ``components.kubelet``), so crash loops are seconds long.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from typing import Any, Callable, Iterator

import kubernetes
import pytest

from k8py.cluster.containerd import ContainerdLayout
from k8py.kubelet.runtime.cri.client import CRIClient, pb
from k8py.kubelet.runtime.protocols import NotFoundError
from tests.cluster.up_helpers import k8py
from tests.kubelet.conftest import phase, ready
from tests.kubelet.test_lifecycle_e2e import GRPC_SERVER, _loop
from tests.support.containerd import containerd_missing
from tests.support.kube import Kubectl
from tests.support.pod_waits import PodWaits

pytestmark = pytest.mark.timeout(600)

NODE = "k8py-node-0"
BUSYBOX = "busybox:1.35"
CONTAINERD_MISSING = "containerd tests need root, Debian's containerd and containernetworking-plugins"
KUBELET_ARGS = ["--backoff-base", "1", "--backoff-max", "8", "--runtime-relist-period", "0.3", "--sync-frequency", "2",
                "--node-status-update-frequency", "2"]


class UpNode(PodWaits):
    """What the lifecycle cases use of tests/kubelet/conftest.py's Node, over a ``k8py up`` cluster."""

    wait_timeout = 90

    def __init__(self, data: str, home: str) -> None:
        self.data = data
        kubeconfig = os.path.join(data, "kubeconfig")
        config = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(config_file=kubeconfig, client_configuration=config)
        self.api = kubernetes.client.ApiClient(config)
        self.kubectl = Kubectl(config.host, home, cluster_kubeconfig=kubeconfig)
        self.layout = ContainerdLayout.for_node(data, NODE)

    def log_tail(self) -> str:
        path = os.path.join(self.data, "logs", f"kubelet-{NODE}.log")
        return "".join(open(path, errors="replace").readlines()[-30:]) if os.path.exists(path) else ""

    def cri(self, call: Callable[[CRIClient], Any]) -> Any:
        async def run() -> Any:
            async with CRIClient(self.layout.endpoint) as client:
                return await call(client)
        return asyncio.run(run())


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> Iterator[UpNode]:
    why = containerd_missing()
    if why:
        pytest.skip(f"{CONTAINERD_MISSING}: {why}")
    tmp = tmp_path_factory.mktemp("matrix")
    config = tmp / "cluster.yaml"
    config.write_text("kind: Cluster\ncomponents:\n  kubelet: [" + ", ".join(f'"{a}"' for a in KUBELET_ARGS) + "]\n")
    data = str(tmp / "cluster")
    up = k8py("up", "--runtime", "containerd", "--detach", "--port", "0", "--no-dns", "--config", str(config),
              "--data-dir", data, timeout=300)
    assert up.returncode == 0, up.stdout + up.stderr
    node = UpNode(data, str(tmp / "home"))
    try:
        yield node
    finally:
        node.api.close()
        down = k8py("down", "--data-dir", data, timeout=180)
        assert down.returncode == 0, down.stdout + down.stderr


_count = iter(range(10**6))


@pytest.fixture
def ns(node: UpNode) -> str:
    name = f"m{next(_count)}-{int(time.time() * 1000) % 100000}"
    node.core.create_namespace({"metadata": {"name": name}})
    return name


def pod_manifest(name: str, containers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeName": NODE, "containers": containers, **spec}}


def _watch_pod(node: UpNode, ns: str, name: str, seen: list[dict[str, Any]], stop: threading.Event) -> threading.Thread:
    def run() -> None:
        w = kubernetes.watch.Watch()
        for ev in w.stream(node.core.list_namespaced_pod, ns, field_selector=f"metadata.name={name}", timeout_seconds=120):
            seen.append({"type": ev["type"], "pod": node.api.sanitize_for_serialization(ev["object"])})
            if stop.is_set() or ev["type"] == "DELETED":
                w.stop()
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_init_containers_sidecars_hooks_and_termination_happen_in_order(node: UpNode, ns: str, tmp_path) -> None:
    shared = tmp_path / "shared"
    log = "/shared/order"
    mount = [{"name": "shared", "mountPath": "/shared"}]
    node.core.create_namespaced_pod(ns, pod_manifest("order", [{
        "name": "main", "image": BUSYBOX, "command": ["sh", "-c", _loop("main", log)],
        "lifecycle": {"postStart": {"exec": {"command": ["sh", "-c", f"echo main-poststart >> {log}"]}},
                      "preStop": {"exec": {"command": ["sh", "-c", f"echo main-prestop >> {log}"]}}},
        "volumeMounts": mount}],
        terminationGracePeriodSeconds=10,
        volumes=[{"name": "shared", "hostPath": {"path": str(shared), "type": "DirectoryOrCreate"}}],
        initContainers=[
            {"name": "init-1", "image": BUSYBOX, "command": ["sh", "-c", f"echo init-1 >> {log}"], "volumeMounts": mount},
            {"name": "init-2", "image": BUSYBOX, "command": ["sh", "-c", f"echo init-2 >> {log}"], "volumeMounts": mount},
            {"name": "sidecar", "image": BUSYBOX, "restartPolicy": "Always", "command": ["sh", "-c", _loop("sidecar", log)],
             "startupProbe": {"exec": {"command": ["grep", "-q", "sidecar-start", log]}, "periodSeconds": 1},
             "volumeMounts": mount}]))
    pod = node.wait_pod(ns, "order", ready, what="Ready")
    init = {s["name"]: s for s in pod["status"]["initContainerStatuses"]}
    assert init["init-1"]["state"]["terminated"]["reason"] == "Completed"
    assert init["sidecar"]["started"] is True and "running" in init["sidecar"]["state"]
    assert pod["status"]["containerStatuses"][0]["containerID"].startswith("containerd://")
    node.core.delete_namespaced_pod("order", ns)
    node.wait_gone(ns, "order")
    lines = (shared / "order").read_text().split()
    assert lines[:3] == ["init-1", "init-2", "sidecar-start"], lines
    assert set(lines[3:5]) == {"main-start", "main-poststart"}, lines
    assert lines[5:] == ["main-prestop", "main-stop", "sidecar-stop"], lines


def test_crash_loop_back_off_doubles_between_restarts(node: UpNode, ns: str) -> None:
    node.core.create_namespaced_pod(ns, pod_manifest("crash", [{"name": "c", "image": BUSYBOX, "command": ["sh", "-c", "exit 1"]}]))
    restarts: dict[int, float] = {}
    messages: set[str] = set()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(restarts) < 6:
        st = (node.pod(ns, "crash").get("status") or {}).get("containerStatuses") or []
        if st:
            restarts.setdefault(st[0]["restartCount"], time.monotonic())
            waiting = st[0]["state"].get("waiting") or {}
            if waiting.get("reason") == "CrashLoopBackOff":
                messages.add(waiting["message"].split(" restarting")[0])
        time.sleep(0.05)
    counts = sorted(restarts)
    assert len(counts) >= 5, restarts
    gaps = [restarts[b] - restarts[a] for a, b in zip(counts, counts[1:])]
    assert gaps[-1] >= 3.5 and gaps[-1] > gaps[0], gaps
    assert {"back-off 2s", "back-off 4s"} <= messages, messages
    events = {e["reason"]: e for e in node.events(ns, "crash")}
    assert events["BackOff"]["type"] == "Warning" and "Back-off restarting failed container c" in events["BackOff"]["message"]
    pod = node.pod(ns, "crash")
    assert pod["status"]["phase"] == "Running"
    assert pod["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"] == 1


def test_restart_policies_decide_what_runs_again(node: UpNode, ns: str) -> None:
    fail, ok = ["sh", "-c", "exit 3"], ["sh", "-c", "exit 0"]
    node.core.create_namespaced_pod(ns, pod_manifest("never", [{"name": "c", "image": BUSYBOX, "command": fail}], restartPolicy="Never"))
    node.core.create_namespaced_pod(ns, pod_manifest("done", [{"name": "c", "image": BUSYBOX, "command": ok}], restartPolicy="OnFailure"))
    node.core.create_namespaced_pod(ns, pod_manifest("retry", [{"name": "c", "image": BUSYBOX, "command": fail}], restartPolicy="OnFailure"))
    never = node.wait_pod(ns, "never", phase("Failed"), what="Failed")
    term = never["status"]["containerStatuses"][0]["state"]["terminated"]
    assert term["exitCode"] == 3 and term["reason"] == "Error" and never["status"]["containerStatuses"][0]["restartCount"] == 0
    done = node.wait_pod(ns, "done", phase("Succeeded"), what="Succeeded")
    assert done["status"]["containerStatuses"][0]["restartCount"] == 0
    retry = node.wait_pod(ns, "retry", lambda p: ((p["status"].get("containerStatuses") or [{}])[0].get("restartCount") or 0) >= 2,
                          what="restarted twice")
    assert retry["status"]["phase"] == "Running" and retry["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"] == 3
    assert node.pod(ns, "never")["status"]["containerStatuses"][0]["restartCount"] == 0


def test_a_failing_liveness_probe_restarts_the_container(node: UpNode, ns: str) -> None:
    node.core.create_namespaced_pod(ns, pod_manifest("live", [{
        "name": "c", "image": BUSYBOX,
        "command": ["sh", "-c", "trap '' TERM; touch /tmp/healthy; sleep 2; rm /tmp/healthy; while true; do sleep 0.1; done"],
        "livenessProbe": {"exec": {"command": ["cat", "/tmp/healthy"]}, "periodSeconds": 1, "failureThreshold": 1,
                          "terminationGracePeriodSeconds": 1},
    }], terminationGracePeriodSeconds=60))
    pod = node.wait_pod(ns, "live", lambda p: ((p["status"].get("containerStatuses") or [{}])[0].get("restartCount") or 0) >= 1,
                        timeout=60, what="restarted")
    assert pod["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"] == 137
    messages = [e["message"] for e in node.events(ns, "live")]
    assert any(m.startswith("Liveness probe failed") for m in messages), messages
    assert any("failed liveness probe, will be restarted" in m for m in messages), messages


def test_readiness_flaps_with_the_probe_without_restarts(node: UpNode, ns: str) -> None:
    node.core.create_namespaced_pod(ns, pod_manifest("flap", [{
        "name": "c", "image": BUSYBOX,
        "command": ["sh", "-c", "while true; do touch /tmp/ready; sleep 2; rm -f /tmp/ready; sleep 2; done"],
        "readinessProbe": {"exec": {"command": ["test", "-f", "/tmp/ready"]}, "periodSeconds": 1, "failureThreshold": 1},
    }], terminationGracePeriodSeconds=1))
    transitions = []
    last = None
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and len(transitions) < 4:
        now = ready(node.pod(ns, "flap"))
        if now != last:
            transitions.append(now)
            last = now
        time.sleep(0.1)
    assert transitions.count(True) >= 2 and transitions.count(False) >= 2, transitions
    assert node.pod(ns, "flap")["status"]["containerStatuses"][0]["restartCount"] == 0


def test_http_and_tcp_probes_reach_the_pod_ip(node: UpNode, ns: str) -> None:
    node.core.create_namespaced_pod(ns, pod_manifest("web", [{
        "name": "c", "image": BUSYBOX, "command": ["sh", "-c", "mkdir -p /www && echo ok > /www/healthz && exec httpd -f -p 8080 -h /www"],
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 1},
        "livenessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 1, "failureThreshold": 2},
    }], terminationGracePeriodSeconds=1))
    node.core.create_namespaced_pod(ns, pod_manifest("missing", [{
        "name": "c", "image": BUSYBOX, "command": ["sh", "-c", "mkdir -p /www && exec httpd -f -p 8080 -h /www"],
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 1},
    }], terminationGracePeriodSeconds=1))
    pod = node.wait_pod(ns, "web", ready, what="Ready")
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        messages = [e["message"] for e in node.events(ns, "missing")]
        if any("404" in m for m in messages):
            break
        time.sleep(0.5)
    assert any(m.startswith("Readiness probe failed: HTTP probe failed with statuscode: 404") for m in messages), messages
    assert not ready(node.pod(ns, "missing"))


def test_sigterm_handler_runs_and_grace_expiry_sends_sigkill(node: UpNode, ns: str, tmp_path) -> None:
    shared = str(tmp_path / "term")
    vol = [{"name": "s", "hostPath": {"path": shared, "type": "DirectoryOrCreate"}}]
    mount = [{"name": "s", "mountPath": "/s"}]
    node.core.create_namespaced_pod(ns, pod_manifest("polite", [{
        "name": "c", "image": BUSYBOX, "volumeMounts": mount,
        "command": ["sh", "-c", "trap 'echo got-term >> /s/polite; exit 0' TERM; while true; do sleep 0.1; done"]}],
        volumes=vol, terminationGracePeriodSeconds=30))
    node.core.create_namespaced_pod(ns, pod_manifest("stubborn", [{
        "name": "c", "image": BUSYBOX, "volumeMounts": mount,
        "command": ["sh", "-c", "trap 'echo ignored-term >> /s/stubborn' TERM; while true; do sleep 0.1; done"]}],
        volumes=vol, terminationGracePeriodSeconds=2))
    for name in ("polite", "stubborn"):
        node.wait_pod(ns, name, phase("Running"), what="Running")
    seen: list[dict[str, Any]] = []
    stop = threading.Event()
    watcher = _watch_pod(node, ns, "stubborn", seen, stop)
    started = time.monotonic()
    node.core.delete_namespaced_pod("polite", ns)
    node.wait_gone(ns, "polite", timeout=30)
    assert time.monotonic() - started < 30 and open(os.path.join(shared, "polite")).read() == "got-term\n"
    started = time.monotonic()
    node.core.delete_namespaced_pod("stubborn", ns)
    node.wait_gone(ns, "stubborn", timeout=40)
    assert time.monotonic() - started >= 2.0
    watcher.join(30)
    assert open(os.path.join(shared, "stubborn")).read().startswith("ignored-term")
    final = [e["pod"] for e in seen if e["type"] == "MODIFIED" and e["pod"]["status"].get("phase") == "Failed"]
    assert final, [e["pod"]["status"].get("phase") for e in seen]
    assert final[-1]["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 137


def _host_python_volumes() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The host's Python (interpreter, shared libraries, grpc) inside a busybox container, read-only."""
    paths = sorted({p for p in ("/usr", "/lib", "/lib64", sys.base_prefix, sys.prefix) if os.path.exists(p)})
    volumes = [{"name": f"py{i}", "hostPath": {"path": p}} for i, p in enumerate(paths)]
    mounts = [{"name": f"py{i}", "mountPath": p, "readOnly": True} for i, p in enumerate(paths)]
    return volumes, mounts


def test_grpc_readiness_probes_use_the_standard_health_check(node: UpNode, ns: str) -> None:
    volumes, mounts = _host_python_volumes()

    def pod(name: str, service: str) -> dict[str, Any]:
        probe: dict[str, Any] = {"grpc": {"port": 9000}, "periodSeconds": 1, "failureThreshold": 1}
        if service:
            probe["grpc"]["service"] = service
        return pod_manifest(name, [{
            "name": "c", "image": BUSYBOX, "command": [sys.executable, "-c", GRPC_SERVER], "volumeMounts": mounts,
            "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
            "readinessProbe": probe}], terminationGracePeriodSeconds=1, volumes=volumes)

    node.core.create_namespaced_pod(ns, pod("grpc-ok", ""))
    node.core.create_namespaced_pod(ns, pod("grpc-broken", "broken"))
    node.wait_pod(ns, "grpc-ok", ready, what="Ready", timeout=120)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        messages = [e["message"] for e in node.events(ns, "grpc-broken")]
        if any("NOT_SERVING" in m for m in messages):
            break
        time.sleep(0.5)
    assert any(m.startswith("Readiness probe failed: service unhealthy") and "NOT_SERVING" in m for m in messages), messages
    assert not ready(node.pod(ns, "grpc-broken"))


def test_a_force_deleted_pod_has_its_containers_stopped(node: UpNode, ns: str) -> None:
    node.core.create_namespaced_pod(ns, pod_manifest("forced", [{"name": "c", "image": BUSYBOX, "command": ["sleep", "600"]}]))
    pod = node.wait_pod(ns, "forced", phase("Running"), what="Running")
    cid = pod["status"]["containerStatuses"][0]["containerID"].split("://")[1]

    def state() -> int | None:
        async def get(cri: CRIClient) -> int | None:
            try:
                return (await cri.container_status(cid)).state
            except NotFoundError:
                return None
        return node.cri(get)

    assert state() == pb.CONTAINER_RUNNING
    node.kubectl.run("delete", "pod", "forced", "-n", ns, "--grace-period=0", "--force")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and state() is not None:
        time.sleep(0.2)
    assert state() is None, "the kubelet never stopped and removed the force-deleted pod's container"
