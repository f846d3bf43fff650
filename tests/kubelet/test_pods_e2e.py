"""e2e: a real kubelet process runs bound pods against a real API server, driven by kubectl."""

from __future__ import annotations

import ipaddress
import os
import json
import time
import urllib.request

from tests.kubelet.conftest import Node, phase, pod_manifest, ready, waiting_reason


def test_the_node_registers_ready_with_node_info_and_renews_its_lease(node: Node) -> None:
    out = json.loads(node.kubectl.run("get", "node", "node-1", "-o", "json").stdout)
    conditions = {c["type"]: c["status"] for c in out["status"]["conditions"]}
    assert conditions == {"Ready": "True", "MemoryPressure": "False", "DiskPressure": "False", "PIDPressure": "False"}
    info = out["status"]["nodeInfo"]
    assert info["kubeletVersion"].startswith("v1.32.") and info["operatingSystem"] == "linux"
    assert out["metadata"]["labels"]["kubernetes.io/hostname"] == "node-1"
    assert out["metadata"]["labels"]["kubernetes.io/os"] == info["operatingSystem"]
    assert int(out["status"]["capacity"]["pods"]) == 110 and "cpu" in out["status"]["allocatable"]
    assert out["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] == node.kubelet.port
    with urllib.request.urlopen(f"http://127.0.0.1:{node.kubelet.port}/healthz", timeout=10) as r:
        assert r.read() == b"ok"
    reasons = {e["reason"] for e in json.loads(node.kubectl.run("get", "events", "-n", "default", "--field-selector",
                                                                "involvedObject.kind=Node", "-o", "json").stdout)["items"]}
    assert {"Starting", "NodeReady"} <= reasons
    first = json.loads(node.kubectl.run("get", "lease", "-n", "kube-node-lease", "node-1", "-o", "json").stdout)
    assert first["spec"]["holderIdentity"] == "node-1" and first["metadata"]["ownerReferences"][0]["kind"] == "Node"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        again = json.loads(node.kubectl.run("get", "lease", "-n", "kube-node-lease", "node-1", "-o", "json").stdout)
        if again["spec"]["renewTime"] != first["spec"]["renewTime"]:
            break
        time.sleep(0.5)
    else:
        raise AssertionError("the node lease was never renewed")


def test_a_bound_nginx_pod_goes_ready_on_its_own_ip_and_serves_the_welcome_page(node: Node, ns: str) -> None:
    node.kubectl.run("apply", "-n", ns, "-f", "-", input=json.dumps(pod_manifest("web", [{
        "name": "nginx", "image": "nginx:1.27", "ports": [{"containerPort": 80, "name": "http"}],
        "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 1},
        "resources": {"requests": {"cpu": "10m"}},
    }])))
    pod = node.wait_pod(ns, "web", ready, what="Ready")
    st = pod["status"]
    assert st["phase"] == "Running" and st["qosClass"] == "Burstable"
    assert ipaddress.ip_address(st["podIP"]) in ipaddress.ip_network("127.64.0.0/10") and st["podIPs"] == [{"ip": st["podIP"]}]
    assert st["hostIP"] == "127.0.0.1" and st["startTime"]
    cs = st["containerStatuses"][0]
    assert cs["ready"] and cs["started"] and cs["restartCount"] == 0 and "running" in cs["state"]
    assert cs["containerID"].startswith("k8py-process://") and cs["imageID"].startswith("sha256:")
    types = {c["type"]: c["status"] for c in st["conditions"]}
    assert types == {"PodReadyToStartContainers": "True", "Initialized": "True", "Ready": "True", "ContainersReady": "True", "PodScheduled": "True"}
    with urllib.request.urlopen(f"http://{st['podIP']}/", timeout=10) as r:
        assert b"Welcome to nginx!" in r.read()
    reasons = [e["reason"] for e in node.events(ns, "web")]
    assert {"Pulling", "Pulled", "Created", "Started"} <= set(reasons)
    table = node.kubectl.run("get", "pod", "web", "-n", ns, "-o", "wide").stdout
    assert "1/1" in table and "Running" in table and st["podIP"] in table
    with urllib.request.urlopen(f"http://127.0.0.1:{node.kubelet.port}/metrics", timeout=10) as r:
        metrics = r.read().decode()
    started = [line for line in metrics.splitlines() if line.startswith("kubelet_started_containers_total ")]
    assert started and float(started[0].split()[1]) >= 1
    assert "kubelet_pod_start_duration_seconds_count" in metrics and "kubelet_running_pods" in metrics


def test_restart_policies_end_in_the_upstream_phases(node: Node, ns: str) -> None:
    for name, policy, code in (("never-fails", "Never", 3), ("never-ok", "Never", 0), ("onfailure-ok", "OnFailure", 0)):
        node.core.create_namespaced_pod(ns, pod_manifest(name, [{"name": "c", "image": "busybox", "command": ["sh", "-c", f"exit {code}"]}],
                                                         restartPolicy=policy))
    node.core.create_namespaced_pod(ns, pod_manifest("onfailure-retries", [{"name": "c", "image": "busybox",
                                                     "command": ["sh", "-c", "exit 1"]}], restartPolicy="OnFailure"))
    failed = node.wait_pod(ns, "never-fails", phase("Failed"), what="Failed")
    term = failed["status"]["containerStatuses"][0]["state"]["terminated"]
    assert term["exitCode"] == 3 and term["reason"] == "Error"
    ok = node.wait_pod(ns, "never-ok", phase("Succeeded"), what="Succeeded")
    assert ok["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"
    node.wait_pod(ns, "onfailure-ok", phase("Succeeded"), what="Succeeded")
    retried = node.wait_pod(ns, "onfailure-retries", lambda p: (p["status"].get("containerStatuses") or [{}])[0].get("restartCount", 0) >= 2,
                            what="restarted twice")
    assert retried["status"]["phase"] == "Running"
    assert retried["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"] == 1


def test_active_deadline_fails_the_pod_with_deadline_exceeded(node: Node, ns: str) -> None:
    node.core.create_namespaced_pod(ns, pod_manifest("deadline", [{"name": "c", "image": "busybox", "command": ["sleep", "300"]}],
                                                     activeDeadlineSeconds=2, terminationGracePeriodSeconds=1))
    node.wait_pod(ns, "deadline", phase("Running"), what="Running")
    pod = node.wait_pod(ns, "deadline", phase("Failed"), what="Failed")
    assert pod["status"]["reason"] == "DeadlineExceeded"
    assert "deadline" in pod["status"]["message"]
    assert "terminated" in pod["status"]["containerStatuses"][0]["state"]


def test_bad_pods_show_upstream_waiting_reasons_and_break_nothing_else(node: Node, ns: str) -> None:
    node.core.create_namespaced_pod(ns, pod_manifest("good", [{"name": "c", "image": "busybox", "command": ["sleep", "300"]}]))
    node.core.create_namespaced_pod(ns, pod_manifest("noimage", [{"name": "c", "image": "no-such-image:1.0"}]))
    node.core.create_namespaced_pod(ns, pod_manifest("badcmd", [{"name": "c", "image": "busybox", "command": ["no-such-command"]}]))
    node.core.create_namespaced_pod(ns, pod_manifest("nocm", [{"name": "c", "image": "busybox", "command": ["sleep", "300"],
                                                               "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "absent", "key": "k"}}}]}]))
    node.core.create_namespaced_pod(ns, pod_manifest("badname", [{"name": "c", "image": "Bad:Image:Name"}]))
    node.core.create_namespaced_pod(ns, pod_manifest("neverpull", [{"name": "c", "image": "alpine:3.19", "imagePullPolicy": "Never"}]))
    node.wait_pod(ns, "noimage", lambda p: waiting_reason(p) in ("ErrImagePull", "ImagePullBackOff"), what="ErrImagePull")
    node.wait_pod(ns, "noimage", lambda p: waiting_reason(p) == "ImagePullBackOff", what="ImagePullBackOff")
    bad = node.wait_pod(ns, "badcmd", lambda p: waiting_reason(p) in ("RunContainerError", "CrashLoopBackOff")
                        and p["status"]["containerStatuses"][0]["lastState"].get("terminated"), what="RunContainerError")
    last = bad["status"]["containerStatuses"][0]["lastState"]["terminated"]
    assert last["reason"] == "StartError" and last["exitCode"] == 128 and "executable file not found" in last["message"]
    nocm = node.wait_pod(ns, "nocm", lambda p: waiting_reason(p) == "CreateContainerConfigError", what="CreateContainerConfigError")
    assert 'configmap "absent" not found' in nocm["status"]["containerStatuses"][0]["state"]["waiting"]["message"]
    node.wait_pod(ns, "badname", lambda p: waiting_reason(p) == "InvalidImageName", what="InvalidImageName")
    never = node.wait_pod(ns, "neverpull", lambda p: waiting_reason(p) == "ErrImageNeverPull", what="ErrImageNeverPull")
    assert "is not present with pull policy of Never" in never["status"]["containerStatuses"][0]["state"]["waiting"]["message"]
    good = node.wait_pod(ns, "good", phase("Running"), what="Running")
    assert good["status"]["containerStatuses"][0]["restartCount"] == 0
    for name in ("noimage", "badcmd", "nocm"):
        assert node.pod(ns, name)["status"]["phase"] == "Pending" if name != "badcmd" else True
    node.core.create_namespaced_config_map(ns, {"metadata": {"name": "absent"}, "data": {"k": "now-here"}})
    node.wait_pod(ns, "nocm", phase("Running"), what="Running once the ConfigMap exists")


def test_env_downward_api_and_volumes_reach_the_container(node: Node, ns: str) -> None:
    node.core.create_namespaced_config_map(ns, {"metadata": {"name": "cfg"}, "data": {"greeting": "hi", "file.txt": "from-configmap"}})
    node.core.create_namespaced_secret(ns, {"metadata": {"name": "sec"}, "stringData": {"password": "s3cret"}})
    script = ("echo \"$GREETING $(GREETING) $POD_NAME $MY_IP $SVC\"; cat /etc/cfg/file.txt; echo; cat /etc/sec/password; echo; "
              "cat /etc/info/labels; echo; ls -a /etc/cfg | tr '\\n' ' '; echo; echo scratch > /scratch/x && cat /scratch/x")
    node.core.create_namespaced_pod(ns, {
        "metadata": {"name": "env", "labels": {"app": "demo"}},
        "spec": {"nodeName": "node-1", "restartPolicy": "Never", "containers": [{
            "name": "c", "image": "busybox", "command": ["sh", "-c", script],
            "env": [{"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "greeting"}}},
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "MY_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                    {"name": "SVC", "value": "$(KUBERNETES_SERVICE_HOST)"}],
            "volumeMounts": [{"name": "cfg", "mountPath": "/etc/cfg"}, {"name": "sec", "mountPath": "/etc/sec"},
                             {"name": "info", "mountPath": "/etc/info"}, {"name": "scratch", "mountPath": "/scratch"}]}],
            "volumes": [{"name": "cfg", "configMap": {"name": "cfg"}}, {"name": "sec", "secret": {"secretName": "sec"}},
                        {"name": "info", "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}},
                        {"name": "scratch", "emptyDir": {}}]}})
    pod = node.wait_pod(ns, "env", lambda p: p["status"].get("phase") in ("Succeeded", "Failed"), what="finished")
    logs = [line.split(" ", 3)[3] for line in _log_lines(node, ns, "env", "c")]
    assert pod["status"]["phase"] == "Succeeded", logs
    ip = pod["status"]["podIP"]
    svc = node.core.read_namespaced_service("kubernetes", "default").spec.cluster_ip
    assert logs[0] == f"hi hi env {ip} {svc}"
    assert logs[1:4] == ["from-configmap", "s3cret", 'app="demo"']
    assert "..data" in logs[4] and "file.txt" in logs[4]
    assert logs[5] == "scratch"


def _log_lines(node: Node, ns: str, pod: str, container: str) -> list[str]:
    import glob
    import os

    uid = node.pod(ns, pod)["metadata"]["uid"]
    path = os.path.join(node.kubelet.root_dir, "logs", "pods", f"{ns}_{pod}_{uid}", container, "0.log")
    assert glob.glob(path), f"no CRI log at {path}"
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def test_a_container_over_its_memory_limit_is_oom_killed_where_cgroups_allow(node: Node, ns: str) -> None:
    import pytest

    info = json.loads(node.kubectl.run("get", "node", "node-1", "-o", "json").stdout)
    if not os.access("/sys/fs/cgroup/memory", os.W_OK):
        pytest.skip("no writable cgroup v1 memory hierarchy on this machine: limits are only recorded")
    assert info["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("k8py-process://")
    node.core.create_namespaced_pod(ns, pod_manifest("hog", [{
        "name": "c", "image": "python", "command": ["python3", "-c", "x = bytearray(200 * 1024 * 1024); print('survived')"],
        "resources": {"limits": {"memory": "32Mi"}, "requests": {"memory": "32Mi"}}}], restartPolicy="Never"))
    pod = node.wait_pod(ns, "hog", phase("Failed"), what="Failed")
    term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert term["reason"] == "OOMKilled" and term["exitCode"] == 137


def test_termination_messages_come_from_the_file_or_the_log_tail(node: Node, ns: str) -> None:
    node.core.create_namespaced_pod(ns, pod_manifest("msgfile", [{
        "name": "c", "image": "busybox", "command": ["sh", "-c", "echo bye-from-file > /dev/termination-log; exit 1"]}],
        restartPolicy="Never"))
    node.core.create_namespaced_pod(ns, pod_manifest("msglog", [{
        "name": "c", "image": "busybox", "command": ["sh", "-c", "echo first; echo last-words; exit 2"],
        "terminationMessagePolicy": "FallbackToLogsOnError"}], restartPolicy="Never"))
    term = node.wait_pod(ns, "msgfile", phase("Failed"), what="Failed")["status"]["containerStatuses"][0]["state"]["terminated"]
    assert term["message"] == "bye-from-file\n" and term["exitCode"] == 1
    term = node.wait_pod(ns, "msglog", phase("Failed"), what="Failed")["status"]["containerStatuses"][0]["state"]["terminated"]
    assert term["message"] == "first\nlast-words\n" and term["exitCode"] == 2


def test_a_changed_configmap_reaches_the_running_container_atomically(node: Node, ns: str) -> None:
    node.core.create_namespaced_config_map(ns, {"metadata": {"name": "live"}, "data": {"v": "one"}})
    node.core.create_namespaced_pod(ns, pod_manifest("watcher", [{
        "name": "c", "image": "busybox", "command": ["sleep", "600"],
        "volumeMounts": [{"name": "cfg", "mountPath": "/etc/live"}]}],
        volumes=[{"name": "cfg", "configMap": {"name": "live"}}], terminationGracePeriodSeconds=1))
    node.wait_pod(ns, "watcher", phase("Running"), what="Running")
    cid = node.pod(ns, "watcher")["status"]["containerStatuses"][0]["containerID"].split("://")[1]
    import asyncio

    async def read() -> str:
        from k8py.kubelet.runtime.process.launcher import nsenter_argv, command_pid, read_status_file

        rec = next(r for r in node.kubelet.container_records() if r["id"] == cid)
        ns_init, _ = read_status_file(os.path.join(node.kubelet.root_dir, "runtime", "containers", cid, "bwrap-status.json"))
        argv = nsenter_argv(command_pid(rec["pid"], ns_init, True), "/", ["cat", "/etc/live/v"])
        proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE)
        out, _ = await proc.communicate()
        return out.decode()

    assert asyncio.run(read()) == "one"
    node.core.patch_namespaced_config_map("live", ns, {"data": {"v": "two"}})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and asyncio.run(read()) != "two":
        time.sleep(0.5)
    assert asyncio.run(read()) == "two"


def test_kubectl_set_image_on_a_pod_restarts_its_container_with_the_new_image(node: Node, ns: str) -> None:
    node.core.create_namespaced_pod(ns, pod_manifest("img", [{"name": "c", "image": "busybox:1.36", "command": ["sleep", "600"]}],
                                                     terminationGracePeriodSeconds=1))
    before = node.wait_pod(ns, "img", phase("Running"), what="Running")["status"]["containerStatuses"][0]["containerID"]
    node.kubectl.run("set", "image", "-n", ns, "pod/img", "c=busybox:1.37")
    after = node.wait_pod(ns, "img", lambda p: p["status"]["containerStatuses"][0]["image"] == "busybox:1.37"
                          and "running" in p["status"]["containerStatuses"][0]["state"], what="running the new image")
    st = after["status"]["containerStatuses"][0]
    assert st["containerID"] != before and st["restartCount"] == 1
    # the Killing event is recorded asynchronously: it can land after the status shows the restart
    deadline = time.monotonic() + 30
    while not any("definition changed" in e["message"] for e in node.events(ns, "img")):
        assert time.monotonic() < deadline, node.events(ns, "img")
        time.sleep(0.2)


def test_a_failed_init_container_fails_a_never_pod_and_its_containers_never_start(node: Node, ns: str) -> None:
    node.core.create_namespaced_pod(ns, pod_manifest("initfail", [{"name": "main", "image": "busybox", "command": ["sleep", "600"]}],
                                                     restartPolicy="Never",
                                                     initContainers=[{"name": "init", "image": "busybox", "command": ["sh", "-c", "exit 7"]}]))
    pod = node.wait_pod(ns, "initfail", phase("Failed"), what="Failed")
    init = pod["status"]["initContainerStatuses"][0]["state"]["terminated"]
    assert init["exitCode"] == 7
    main = pod["status"]["containerStatuses"][0]
    assert "running" not in main["state"] and main["restartCount"] == 0 and "containerID" not in main


def test_working_dir_and_a_failing_post_start_hook(node: Node, ns: str) -> None:
    node.core.create_namespaced_pod(ns, pod_manifest("wd", [{"name": "c", "image": "busybox", "workingDir": "/tmp",
                                                             "command": ["sh", "-c", "pwd"]}], restartPolicy="Never"))
    node.wait_pod(ns, "wd", phase("Succeeded"), what="Succeeded")
    assert [line.split(" ", 3)[3] for line in _log_lines(node, ns, "wd", "c")] == ["/tmp"]
    node.core.create_namespaced_pod(ns, pod_manifest("hookfail", [{
        "name": "c", "image": "busybox", "command": ["sleep", "600"],
        "lifecycle": {"postStart": {"exec": {"command": ["sh", "-c", "exit 1"]}}}}], terminationGracePeriodSeconds=1))
    pod = node.wait_pod(ns, "hookfail", lambda p: ((p["status"].get("containerStatuses") or [{}])[0].get("restartCount") or 0) >= 1,
                        what="restarted after its postStart hook failed")
    assert any(e["reason"] == "FailedPostStartHook" for e in node.events(ns, "hookfail"))


def test_an_empty_dir_over_its_size_limit_gets_the_pod_evicted(node: Node, ns: str) -> None:
    node.core.create_namespaced_pod(ns, pod_manifest("filler", [{
        "name": "c", "image": "busybox", "command": ["sh", "-c", "head -c 2097152 /dev/zero > /scratch/big; sleep 600"],
        "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}],
        volumes=[{"name": "scratch", "emptyDir": {"sizeLimit": "1Mi"}}], terminationGracePeriodSeconds=1))
    pod = node.wait_pod(ns, "filler", phase("Failed"), what="Failed (evicted)")
    assert pod["status"]["reason"] == "Evicted"
    assert pod["status"]["message"].startswith('Usage of EmptyDir volume "scratch" exceeds the limit "1Mi"')


def test_a_readiness_gate_holds_ready_until_its_condition_is_set_and_the_condition_is_kept(node: Node, ns: str) -> None:
    node.core.create_namespaced_pod(ns, pod_manifest("gated", [{"name": "c", "image": "busybox", "command": ["sleep", "300"]}],
                                                     readinessGates=[{"conditionType": "example.com/load-balancer"}]))

    def gate_blocks(pod: dict) -> bool:
        conds = {c["type"]: c for c in (pod.get("status") or {}).get("conditions") or []}
        return conds.get("ContainersReady", {}).get("status") == "True" and conds.get("Ready", {}).get("reason") == "ReadinessGatesNotReady"

    pod = node.wait_pod(ns, "gated", gate_blocks, what="containers ready, the gate not")
    message = next(c["message"] for c in pod["status"]["conditions"] if c["type"] == "Ready")
    assert message == 'corresponding condition of pod readiness gate "example.com/load-balancer" does not exist.'
    # what a load-balancer controller does: set the gate's condition through the status subresource
    node.kubectl.run("patch", "pod", "gated", "-n", ns, "--subresource=status", "--type=strategic", "-p", json.dumps(
        {"status": {"conditions": [{"type": "example.com/load-balancer", "status": "True"}]}}))
    pod = node.wait_pod(ns, "gated", ready, what="Ready once the gate passes")
    conds = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
    assert conds["example.com/load-balancer"] == "True" and conds["Ready"] == "True"
    header, row = node.kubectl.run("get", "pod", "gated", "-n", ns, "-o", "wide").stdout.splitlines()[:2]
    assert header.split()[-2:] == ["READINESS", "GATES"] and row.split()[-1] == "1/1"
