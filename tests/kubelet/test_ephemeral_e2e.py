"""e2e: ``kubectl debug`` adds an ephemeral container through
``pods/ephemeralcontainers``; the real kubelet runs it once (never restarted),
reports ``status.ephemeralContainerStatuses`` and serves its logs."""

from __future__ import annotations

import re
from typing import Any

from tests.kubelet.conftest import Node, phase, pod_manifest, ready


def _ephemeral(pod: dict[str, Any], name: str) -> dict[str, Any]:
    return next((s for s in (pod.get("status") or {}).get("ephemeralContainerStatuses") or [] if s["name"] == name), {})


def _terminated(name: str):
    return lambda pod: "terminated" in (_ephemeral(pod, name).get("state") or {})


def test_kubectl_debug_runs_an_ephemeral_container_once_and_its_logs_are_served(node: Node, ns: str) -> None:
    node.core.create_namespaced_pod(ns, pod_manifest("app", [{"name": "c", "image": "busybox", "command": ["sleep", "600"]}],
                                                     terminationGracePeriodSeconds=1))
    node.wait_pod(ns, "app", lambda p: phase("Running")(p) and ready(p), what="Running and Ready")
    out = node.kubectl.run("debug", "app", "-n", ns, "-it=false", "--image=busybox", "--target=c", "--",
                           "sh", "-c", "echo hi")
    m = re.search(r"Defaulting debug container name to (debugger-[a-z0-9]+)", out.stderr + out.stdout)
    assert m, out.stderr
    name = m.group(1)
    pod = node.wait_pod(ns, "app", _terminated(name), what=f"{name} terminated")
    st = _ephemeral(pod, name)
    assert st["state"]["terminated"]["exitCode"] == 0 and st["state"]["terminated"]["reason"] == "Completed"
    assert st["image"] == "busybox" and st["containerID"] and st["ready"] is False
    # the pod is unaffected: still Running and Ready with its one container
    assert pod["status"]["phase"] == "Running" and ready(pod)
    assert node.kubectl.run("logs", "app", "-n", ns, "-c", name).stdout == "hi\n"

    # a failing one is not restarted either, while the pod keeps running
    node.kubectl.run("debug", "app", "-n", ns, "-it=false", "--image=busybox", "--container=broken", "--",
                     "sh", "-c", "echo bye; exit 3")
    pod = node.wait_pod(ns, "app", _terminated("broken"), what="broken terminated")
    assert _ephemeral(pod, "broken")["state"]["terminated"]["exitCode"] == 3
    # a later sync (a label change wakes the worker) starts nothing again
    node.kubectl.run("label", "pod", "app", "-n", ns, "poke=1")
    node.wait_pod(ns, "app", lambda p: (p["metadata"].get("labels") or {}).get("poke") == "1")
    node.kubectl.run("label", "pod", "app", "-n", ns, "poke=2", "--overwrite")
    pod = node.wait_pod(ns, "app", lambda p: (p["metadata"].get("labels") or {}).get("poke") == "2")
    for n in (name, "broken"):
        st = _ephemeral(pod, n)
        assert st["restartCount"] == 0 and "terminated" in st["state"], st
    assert pod["status"]["phase"] == "Running" and pod["status"]["containerStatuses"][0]["restartCount"] == 0
    assert node.kubectl.run("logs", "app", "-n", ns, "-c", "broken").stdout == "bye\n"

    # deleting the pod still works with ephemeral containers in it
    node.kubectl.run("delete", "pod", "app", "-n", ns, "--wait=false")
    node.wait_gone(ns, "app")


def test_kubectl_debug_against_a_missing_target_is_refused_clearly(node: Node, ns: str) -> None:
    node.core.create_namespaced_pod(ns, pod_manifest("t", [{"name": "c", "image": "busybox", "command": ["sleep", "600"]}],
                                                     terminationGracePeriodSeconds=1))
    out = node.kubectl.run("debug", "t", "-n", ns, "-it=false", "--image=busybox", "--target=nope", "--", "true",
                           check=False)
    assert out.returncode != 0
    assert "targetContainerName" in out.stderr and 'Not found: "nope"' in out.stderr, out.stderr


def test_kubectl_debug_target_joins_the_target_containers_process_namespace(node: Node, ns: str) -> None:
    # the target's process is visible (and signalable) from the debug container; without --target it is not
    node.core.create_namespaced_pod(ns, pod_manifest("app", [
        {"name": "c", "image": "busybox", "command": ["sh", "-c", "exec sleep 4242"]}], terminationGracePeriodSeconds=1))
    node.wait_pod(ns, "app", lambda p: phase("Running")(p) and ready(p), what="Running and Ready")
    script = "ps -o pid,args | awk '$2 == \"sleep\" && $3 == \"4242\"' | grep . || echo no-sleep-seen"
    out = node.kubectl.run("debug", "app", "-n", ns, "-it=false", "--image=busybox", "--target=c", "--container=joined",
                           "--", "sh", "-c", script)
    assert out.returncode == 0
    pod = node.wait_pod(ns, "app", _terminated("joined"), what="joined terminated")
    assert _ephemeral(pod, "joined")["state"]["terminated"]["exitCode"] == 0
    joined = node.kubectl.run("logs", "app", "-n", ns, "-c", "joined").stdout
    assert "sleep 4242" in joined and "no-sleep-seen" not in joined, joined
    pid = int(joined.split()[0])
    assert pid < 100, joined  # a pid of the target's namespace, not the host's

    node.kubectl.run("debug", "app", "-n", ns, "-it=false", "--image=busybox", "--container=apart", "--", "sh", "-c", script)
    node.wait_pod(ns, "app", _terminated("apart"), what="apart terminated")
    assert "no-sleep-seen" in node.kubectl.run("logs", "app", "-n", ns, "-c", "apart").stdout

    # it can signal the target: the target container exits and is restarted as its policy says (the debug
    # container, in the namespace that ended with the target, goes too: as under runc, where the target is pid 1)
    node.kubectl.run("debug", "app", "-n", ns, "-it=false", "--image=busybox", "--target=c", "--container=killer",
                     "--", "sh", "-c", f"kill {pid}")
    pod = node.wait_pod(ns, "app", lambda p: p["status"]["containerStatuses"][0]["restartCount"] >= 1, what="target restarted")
    assert pod["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"] == 143  # SIGTERM
    node.wait_pod(ns, "app", _terminated("killer"), what="killer terminated")
    node.kubectl.run("delete", "pod", "app", "-n", ns, "--wait=false")
    node.wait_gone(ns, "app")
