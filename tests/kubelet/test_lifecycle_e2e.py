"""e2e: the pod lifecycle's order and timing, observed from outside (files, status, events).

The kubelet runs with ``--backoff-base 1 --backoff-max 8`` (tests/support/kubelet.py),
so crash loops are seconds long instead of minutes.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import kubernetes

from tests.kubelet.conftest import Node, phase, pod_manifest, ready


def _loop(tag: str, path: str) -> str:
    # a short foreground sleep so the trap runs promptly
    return f"echo {tag}-start >> {path}; trap 'echo {tag}-stop >> {path}; exit 0' TERM; while true; do sleep 0.1; done"


def _watch_pod(node: Node, ns: str, name: str, seen: list[dict[str, Any]], stop: threading.Event) -> threading.Thread:
    def run() -> None:
        w = kubernetes.watch.Watch()
        for ev in w.stream(node.core.list_namespaced_pod, ns, field_selector=f"metadata.name={name}", timeout_seconds=120):
            seen.append({"type": ev["type"], "pod": node.api.sanitize_for_serialization(ev["object"])})
            if stop.is_set() or ev["type"] == "DELETED":
                w.stop()
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_init_containers_sidecars_hooks_and_termination_happen_in_order(node: Node, ns: str, tmp_path) -> None:
    shared = tmp_path / "shared"
    log = "/shared/order"
    node.core.create_namespaced_pod(ns, {
        "metadata": {"name": "order"},
        "spec": {
            "nodeName": "node-1", "terminationGracePeriodSeconds": 10,
            "volumes": [{"name": "shared", "hostPath": {"path": str(shared), "type": "DirectoryOrCreate"}}],
            "initContainers": [
                {"name": "init-1", "image": "busybox", "command": ["sh", "-c", f"echo init-1 >> {log}"],
                 "volumeMounts": [{"name": "shared", "mountPath": "/shared"}]},
                {"name": "init-2", "image": "busybox", "command": ["sh", "-c", f"echo init-2 >> {log}"],
                 "volumeMounts": [{"name": "shared", "mountPath": "/shared"}]},
                {"name": "sidecar", "image": "busybox", "restartPolicy": "Always", "command": ["sh", "-c", _loop("sidecar", log)],
                 "startupProbe": {"exec": {"command": ["grep", "-q", "sidecar-start", log]}, "periodSeconds": 1},
                 "volumeMounts": [{"name": "shared", "mountPath": "/shared"}]},
            ],
            "containers": [{
                "name": "main", "image": "busybox", "command": ["sh", "-c", _loop("main", log)],
                "lifecycle": {"postStart": {"exec": {"command": ["sh", "-c", f"echo main-poststart >> {log}"]}},
                              "preStop": {"exec": {"command": ["sh", "-c", f"echo main-prestop >> {log}"]}}},
                "volumeMounts": [{"name": "shared", "mountPath": "/shared"}]}],
        }})
    pod = node.wait_pod(ns, "order", ready, what="Ready")
    init = {s["name"]: s for s in pod["status"]["initContainerStatuses"]}
    assert init["init-1"]["state"]["terminated"]["reason"] == "Completed"
    assert init["sidecar"]["started"] is True and "running" in init["sidecar"]["state"]
    node.core.delete_namespaced_pod("order", ns)
    node.wait_gone(ns, "order")
    lines = (shared / "order").read_text().split()
    assert lines[:3] == ["init-1", "init-2", "sidecar-start"], lines
    assert set(lines[3:5]) == {"main-start", "main-poststart"}, lines
    assert lines[5:] == ["main-prestop", "main-stop", "sidecar-stop"], lines


def test_crash_loop_back_off_doubles_between_restarts(node: Node, ns: str) -> None:
    node.core.create_namespaced_pod(ns, pod_manifest("crash", [{"name": "c", "image": "busybox", "command": ["sh", "-c", "exit 1"]}]))
    restarts: dict[int, float] = {}
    messages: set[str] = set()
    deadline = time.monotonic() + 90
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
    # 1 s, 2 s, 4 s, 8 s (base 1, max 8): each wait at least the back-off, allowing for poll granularity
    assert gaps[-1] >= 3.5 and gaps[-1] > gaps[0], gaps
    assert {"back-off 2s", "back-off 4s"} <= messages, messages
    events = {e["reason"]: e for e in node.events(ns, "crash")}
    assert events["BackOff"]["type"] == "Warning" and "Back-off restarting failed container c" in events["BackOff"]["message"]
    pod = node.pod(ns, "crash")
    assert pod["status"]["phase"] == "Running"
    assert pod["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"] == 1


def test_a_failing_liveness_probe_restarts_the_container(node: Node, ns: str) -> None:
    # the container ignores SIGTERM: the probe's own grace period (1 s), not the pod's (60 s), bounds the kill
    node.core.create_namespaced_pod(ns, pod_manifest("live", [{
        "name": "c", "image": "busybox",
        "command": ["sh", "-c", "trap '' TERM; touch /tmp/healthy; sleep 2; rm /tmp/healthy; while true; do sleep 0.1; done"],
        "livenessProbe": {"exec": {"command": ["cat", "/tmp/healthy"]}, "periodSeconds": 1, "failureThreshold": 1,
                          "terminationGracePeriodSeconds": 1},
    }], terminationGracePeriodSeconds=60))
    pod = node.wait_pod(ns, "live", lambda p: ((p["status"].get("containerStatuses") or [{}])[0].get("restartCount") or 0) >= 1,
                        timeout=40, what="restarted")
    assert pod["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"] == 137
    messages = [e["message"] for e in node.events(ns, "live")]
    assert any(m.startswith("Liveness probe failed") for m in messages), messages
    assert any("failed liveness probe, will be restarted" in m for m in messages), messages


def test_readiness_flaps_with_the_probe_without_restarts(node: Node, ns: str) -> None:
    node.core.create_namespaced_pod(ns, pod_manifest("flap", [{
        "name": "c", "image": "busybox",
        "command": ["sh", "-c", "while true; do touch /tmp/ready; sleep 2; rm -f /tmp/ready; sleep 2; done"],
        "readinessProbe": {"exec": {"command": ["test", "-f", "/tmp/ready"]}, "periodSeconds": 1, "failureThreshold": 1},
    }], terminationGracePeriodSeconds=1))
    transitions = []
    last = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(transitions) < 4:
        now = ready(node.pod(ns, "flap"))
        if now != last:
            transitions.append(now)
            last = now
        time.sleep(0.1)
    assert transitions.count(True) >= 2 and transitions.count(False) >= 2, transitions
    assert node.pod(ns, "flap")["status"]["containerStatuses"][0]["restartCount"] == 0


def test_sigterm_handler_runs_and_grace_expiry_sends_sigkill(node: Node, ns: str, tmp_path) -> None:
    shared = str(tmp_path / "term")
    vol = [{"name": "s", "hostPath": {"path": shared, "type": "DirectoryOrCreate"}}]
    mount = [{"name": "s", "mountPath": "/s"}]
    node.core.create_namespaced_pod(ns, pod_manifest("polite", [{
        "name": "c", "image": "busybox", "volumeMounts": mount,
        "command": ["sh", "-c", "trap 'echo got-term >> /s/polite; exit 0' TERM; while true; do sleep 0.1; done"]}],
        volumes=vol, terminationGracePeriodSeconds=30))
    node.core.create_namespaced_pod(ns, pod_manifest("stubborn", [{
        "name": "c", "image": "busybox", "volumeMounts": mount,
        "command": ["sh", "-c", "trap 'echo ignored-term >> /s/stubborn' TERM; while true; do sleep 0.1; done"]}],
        volumes=vol, terminationGracePeriodSeconds=2))
    for name in ("polite", "stubborn"):
        node.wait_pod(ns, name, phase("Running"), what="Running")
    seen: list[dict[str, Any]] = []
    stop = threading.Event()
    watcher = _watch_pod(node, ns, "stubborn", seen, stop)
    started = time.monotonic()
    node.core.delete_namespaced_pod("polite", ns)
    node.wait_gone(ns, "polite", timeout=20)
    polite_took = time.monotonic() - started
    assert polite_took < 20 and open(os.path.join(shared, "polite")).read() == "got-term\n"
    started = time.monotonic()
    node.core.delete_namespaced_pod("stubborn", ns)
    node.wait_gone(ns, "stubborn", timeout=30)
    assert time.monotonic() - started >= 2.0
    watcher.join(30)
    assert open(os.path.join(shared, "stubborn")).read().startswith("ignored-term")
    final = [e["pod"] for e in seen if e["type"] == "MODIFIED" and e["pod"]["status"].get("phase") == "Failed"]
    assert final, [e["pod"]["status"].get("phase") for e in seen]
    assert final[-1]["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 137


GRPC_SERVER = """
import asyncio, os, grpc
async def main():
    async def check(request, context):
        # SERVING for the whole server, NOT_SERVING for the service named "broken"
        return bytes([0x08, 2 if b"broken" in request else 1])
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "grpc.health.v1.Health", {"Check": grpc.unary_unary_rpc_method_handler(check)}),))
    server.add_insecure_port(os.environ["POD_IP"] + ":9000")
    await server.start()
    await server.wait_for_termination()
asyncio.run(main())
"""


def test_grpc_readiness_probes_use_the_standard_health_check(node: Node, ns: str) -> None:
    import sys

    def pod(name: str, service: str) -> dict[str, Any]:
        probe: dict[str, Any] = {"grpc": {"port": 9000}, "periodSeconds": 1, "failureThreshold": 1}
        if service:
            probe["grpc"]["service"] = service
        return pod_manifest(name, [{
            "name": "c", "image": "python", "command": [sys.executable, "-c", GRPC_SERVER],
            "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
            "readinessProbe": probe}], terminationGracePeriodSeconds=1)

    node.core.create_namespaced_pod(ns, pod("grpc-ok", ""))
    node.core.create_namespaced_pod(ns, pod("grpc-broken", "broken"))
    node.wait_pod(ns, "grpc-ok", ready, what="Ready")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        messages = [e["message"] for e in node.events(ns, "grpc-broken")]
        if any("NOT_SERVING" in m for m in messages):
            break
        time.sleep(0.5)
    assert any(m.startswith("Readiness probe failed: service unhealthy") and "NOT_SERVING" in m for m in messages), messages
    assert not ready(node.pod(ns, "grpc-broken"))


def test_a_force_deleted_pod_has_its_containers_stopped(node: Node, ns: str) -> None:
    from k8py.kubelet.runtime.process.records import is_same_process

    node.core.create_namespaced_pod(ns, pod_manifest("forced", [{"name": "c", "image": "busybox", "command": ["sleep", "600"]}]))
    pod = node.wait_pod(ns, "forced", phase("Running"), what="Running")
    cid = pod["status"]["containerStatuses"][0]["containerID"].split("://")[1]
    rec = next(r for r in node.kubelet.container_records() if r["id"] == cid)
    assert is_same_process(rec["pid"], rec["start_ticks"])
    node.kubectl.run("delete", "pod", "forced", "-n", ns, "--grace-period=0", "--force")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and is_same_process(rec["pid"], rec["start_ticks"]):
        time.sleep(0.1)
    assert not is_same_process(rec["pid"], rec["start_ticks"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(r["id"] == cid for r in node.kubelet.container_records()):
        time.sleep(0.1)
    assert not any(r["id"] == cid for r in node.kubelet.container_records()), "the container was never cleaned up"
