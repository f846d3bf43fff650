"""``k8py up`` end to end: real processes, the real kubectl.

One detached cluster on a temp data directory: a Deployment gets Running
pods; the zygote that forked the components has retired; a component killed
with SIGKILL is restarted by the supervisor (as its own interpreter) and the
cluster keeps working; ``k8py down`` leaves no process; ``k8py up`` again on
the same directory keeps the objects and runs the pods again.
"""

from __future__ import annotations

import json
import os
import signal

import pytest

from k8py.cluster.addresses import dns_ip
from k8py.cluster.state import pid_alive, read_state
from k8py.cluster.sweep import processes_of
from tests.cluster.up_helpers import k8py, wait_for
from tests.support.kube import Kubectl

pytestmark = [pytest.mark.kubectl, pytest.mark.slow]


def running_pods(kubectl: Kubectl, selector: str) -> list[dict]:
    items = json.loads(kubectl.run("get", "pods", "-l", selector, "-o", "json").stdout)["items"]
    return [p for p in items if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]


def ppid(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def kubectl_for(data_dir: str, home: str) -> Kubectl:
    state = read_state(data_dir)
    assert state is not None
    return Kubectl(state["api"], home, state["kubeconfig"])


def test_up_runs_pods_restarts_a_killed_component_stops_clean_and_resumes(tmp_path):
    data = str(tmp_path / "cluster")
    try:
        up = k8py("up", "--detach", "--data-dir", data, "--port", "0")
        assert up.returncode == 0, up.stdout + up.stderr
        for line in ("apiserver up", "controller-manager up", "scheduler up", "node k8py-node-0 Ready", "cluster ready in"):
            assert line in up.stdout, up.stdout
        assert f"export KUBECONFIG={data}/kubeconfig" in up.stdout

        status = k8py("status", "--data-dir", data)
        assert status.returncode == 0, status.stderr
        assert "nodes: 1/1 Ready" in status.stdout and f"{data}/logs/scheduler.log" in status.stdout

        again = k8py("up", "--data-dir", data, "--port", "0")
        assert again.returncode == 1 and "already running" in again.stderr

        # every component was forked by the zygote (k8py imported once), which then retired (it forks nothing more)
        components = read_state(data)["components"]
        retired = components.pop("zygote")
        zygote = retired["pid"]
        assert retired["state"] == "retired"
        for name, comp in components.items():
            assert ppid(comp["pid"]) == zygote, name

        kubectl = kubectl_for(data, str(tmp_path / "home"))
        # kubelets renew their client certificates (--rotate-certificates): their renewals are auto-approved
        binding = json.loads(kubectl.run("get", "clusterrolebinding", "kubeadm:node-autoapprove-certificate-rotation",
                                         "-o", "json").stdout)
        assert binding["roleRef"]["name"] == "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient"
        assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}]
        # k8py dns advertises itself, under its own RBAC identity, as a DNS add-on's Service would
        dns = wait_for(lambda: (r := kubectl.run("get", "service", "kube-dns", "-n", "kube-system", "-o", "json",
                                                 check=False)).returncode == 0 and r, "kube-system/kube-dns")
        assert json.loads(dns.stdout)["spec"]["clusterIP"] == dns_ip(read_state(data)["serviceCIDR"])
        kubectl.run("create", "deployment", "web", "--image=nginx", "--replicas=2")
        wait_for(lambda: len(running_pods(kubectl, "app=web")) == 2, "2 Running pods")

        state = read_state(data)
        victim = state["components"]["controller-manager"]["pid"]
        os.kill(victim, signal.SIGKILL)
        restarted = wait_for(lambda: (c := read_state(data)["components"]["controller-manager"])["restarts"] == 1
                             and c["state"] == "running" and c["pid"] != victim and c, "the controller manager to be restarted")
        assert pid_alive(restarted["pid"])
        assert ppid(restarted["pid"]) == state["pid"]  # its own interpreter, started by the supervisor
        kubectl.run("scale", "deployment", "web", "--replicas=3")
        wait_for(lambda: len(running_pods(kubectl, "app=web")) == 3, "3 Running pods after the restart")

        before = processes_of(data)
        assert len(before) >= 4 + 3 + 3, before  # apiserver, cm, scheduler, kubelet, proxy/dns, 3 containers
        down = k8py("down", "--data-dir", data)
        assert down.returncode == 0 and "stopped" in down.stdout, down.stdout + down.stderr
        assert processes_of(data) == [] and not any(pid_alive(pid) for pid in before)  # (a zombie awaiting its reaper is not alive)
        assert k8py("status", "--data-dir", data).returncode == 1

        up = k8py("up", "--detach", "--data-dir", data, "--port", "0")
        assert up.returncode == 0, up.stdout + up.stderr
        kubectl = kubectl_for(data, str(tmp_path / "home2"))
        assert kubectl.run("get", "deployment", "web", "-o", "jsonpath={.spec.replicas}").stdout == "3"
        wait_for(lambda: len(running_pods(kubectl, "app=web")) == 3, "the pods running again after resuming")
    finally:
        k8py("down", "--data-dir", data)
    assert processes_of(data) == []
