"""The seed scenario, end to end through the real kubectl on ``k8py up --trace``,
each step of the list-watch flow asserted in order from ``k8py flow --output json``:

create a ReplicaSet of 3 → stored (rv) → the controller manager is sent ADDED
and creates 3 pods → the scheduler is sent each unbound pod and binds it →
the kubelet is sent the bound pod and reports it Running with its own IP →
the ReplicaSet's status is updated; scale to 5 (2 more pods) and to 2 (3
deleted: the controller manager deletes, the kubelet is sent the deletion,
stops the containers and removes the pod — graceful termination); delete the
ReplicaSet (the garbage collector deletes the rest, each terminated the same way).
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from k8py.cluster.state import read_state
from tests.cluster.up_helpers import k8py, wait_for
from tests.support.kube import Kubectl

pytestmark = [pytest.mark.kubectl, pytest.mark.slow]

REPLICASET = """apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 5
      containers: [{name: nginx, image: nginx}]
"""

Record = dict[str, Any]


class Flow:
    """The records, with "the first one after" lookups that fail with what was looked for."""

    def __init__(self, records: list[Record]) -> None:
        self.records = records

    def all(self, after: int = 0, **want: Any) -> list[Record]:
        def ok(r: Record) -> bool:
            for key, value in want.items():
                if key.startswith("s_"):
                    got = (r.get("summary") or {}).get(key[2:])
                else:
                    got = r.get(key)
                if callable(value) and not value(got):
                    return False
                if not callable(value) and got != value:
                    return False
            return True

        return [r for r in self.records if r["seq"] > after and ok(r)]

    def first(self, after: int = 0, **want: Any) -> Record:
        found = self.all(after, **want)
        assert found, f"no flow record after seq {after} with {want}"
        return found[0]


def test_the_seed_scenario_flow_in_order(tmp_path):
    data = str(tmp_path / "cluster")
    try:
        up = k8py("up", "--detach", "--trace", "--data-dir", data, "--port", "0")
        assert up.returncode == 0, up.stdout + up.stderr
        kubectl = Kubectl(read_state(data)["api"], str(tmp_path / "home"), read_state(data)["kubeconfig"])

        def pods() -> list[Record]:
            items = json.loads(kubectl.run("get", "pods", "-l", "app=web", "-o", "json").stdout)["items"]
            return [p for p in items if not p["metadata"].get("deletionTimestamp")]

        def running(n: int) -> bool:
            ps = pods()
            return len(ps) == n and all(p["status"].get("phase") == "Running" for p in ps)

        kubectl.run("create", "-f", "-", input=REPLICASET)
        wait_for(lambda: running(3), "3 Running pods")
        wait_for(lambda: kubectl.run("get", "rs", "web", "-o", "jsonpath={.status.readyReplicas}").stdout == "3", "status 3 ready")
        kubectl.run("scale", "rs", "web", "--replicas=5")
        wait_for(lambda: running(5), "5 Running pods")
        kubectl.run("scale", "rs", "web", "--replicas=2")
        wait_for(lambda: len(json.loads(kubectl.run("get", "pods", "-l", "app=web", "-o", "json").stdout)["items"]) == 2, "3 pods gone")
        kubectl.run("delete", "rs", "web")
        wait_for(lambda: not json.loads(kubectl.run("get", "pods", "-l", "app=web", "-o", "json").stdout)["items"], "every pod gone")

        out = k8py("flow", "--data-dir", data, "--output", "json", "--name", "web*")
        assert out.returncode == 0, out.stderr
        flow = Flow([json.loads(line) for line in out.stdout.splitlines()])
        text = k8py("flow", "--data-dir", data, "--resource", "replicasets", "--kind", "write").stdout
        assert "kubectl" in text and "create  replicasets default/web" in text
    finally:
        k8py("down", "--data-dir", data)

    # 1. kubectl's create is stored at rv R; the controller manager is sent ADDED at R
    create = flow.first(kind="write", component="kubectl", verb="create", resource="replicasets", name="web")
    rv = create["rv"]
    added = flow.first(kind="watch", component="controller-manager", event="ADDED", resource="replicasets", name="web", rv=rv)
    # 2. in response it creates 3 pods owned by the ReplicaSet, and says so in Events
    created = flow.all(added["seq"], kind="write", component="controller-manager", verb="create", resource="pods",
                       s_owner="ReplicaSet/web")
    assert len(created) == 5  # 3, and 2 more on the scale to 5
    first_three = created[:3]
    successful = flow.all(added["seq"], kind="write", resource="events", s_reason="SuccessfulCreate", s_involvedObject="ReplicaSet/web")
    messages = " ".join(e["summary"]["message"] for e in successful)
    assert all(f"Created pod: {p['name']}" in messages for p in created[:3]), messages
    ips = set()
    for pod in first_three:
        name = pod["name"]
        # 3. the scheduler is sent the unbound pod, then binds it
        unbound = flow.first(kind="watch", component="scheduler", resource="pods", name=name, s_nodeName="")
        bind = flow.first(unbound["seq"], kind="write", component="scheduler", resource="pods", subresource="binding", name=name)
        flow.first(unbound["seq"], kind="write", component="scheduler", resource="events", s_reason="Scheduled",
                   s_involvedObject=f"Pod/{name}")
        # 4. the kubelet is sent the bound pod and reports it Running, with its own IP
        bound = flow.first(unbound["seq"], kind="watch", component="kubelet", resource="pods", name=name,
                           s_nodeName=lambda n: bool(n))
        assert int(bound["rv"]) > int(unbound["rv"]) and bound["summary"]["nodeName"] == "k8py-node-0"
        assert bind["code"] == 201
        started = flow.first(bound["seq"], kind="write", component="kubelet", resource="pods", subresource="status", name=name,
                             s_phase="Running", s_podIP=lambda ip: bool(ip))
        ips.add(started["summary"]["podIP"])
    assert len(ips) == 3
    # 5. the ReplicaSet's status follows: 3 ready
    last_running = max(flow.first(kind="write", component="kubelet", subresource="status", name=p["name"], s_phase="Running")["seq"]
                       for p in first_three)
    flow.first(last_running - 1, kind="write", component="controller-manager", resource="replicasets", subresource="status",
               name="web", s_readyReplicas=3)

    # 6. scale to 5: kubectl writes the scale, two more pods follow
    scale5 = flow.first(kind="write", component="kubectl", resource="replicasets", subresource="scale", name="web")
    assert all(p["seq"] > scale5["seq"] for p in created[3:])
    # 7. scale to 2: the controller manager deletes 3; each is terminated by its kubelet, which removes it
    scale2 = flow.first(scale5["seq"], kind="write", component="kubectl", resource="replicasets", subresource="scale", name="web")
    deletes = flow.all(scale2["seq"], kind="write", component="controller-manager", verb="delete", resource="pods")
    deleted = {d["name"] for d in deletes}
    removal = flow.first(kind="write", component="kubectl", verb="delete", resource="replicasets", name="web")
    by_scale = {d["name"] for d in deletes if d["seq"] < removal["seq"]}
    assert len(by_scale) == 3
    # 8. deleting the ReplicaSet: the garbage collector deletes the other two
    assert len(deleted - by_scale) == 2 and deleted == {p["name"] for p in created}
    for d in deletes:
        told = flow.first(d["seq"] - 1, kind="watch", component="kubelet", resource="pods", name=d["name"], s_deleting=True)
        flow.first(told["seq"], kind="write", component="kubelet", verb="delete", resource="pods", name=d["name"])


def test_up_trace_in_the_foreground_prints_the_flow_live(tmp_path):
    """Also the path without the zygote: each component its own interpreter."""
    data = str(tmp_path / "live")
    proc = subprocess.Popen([sys.executable, "-m", "k8py", "up", "--trace", "--data-dir", data, "--port", "0", "--no-dns", "--no-proxy",
                             "--no-zygote"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        seen: list[str] = []
        for line in proc.stdout:
            seen.append(line)
            if "The list-watch flow, live" in line:
                break
        else:
            raise AssertionError("".join(seen))
        state = read_state(data)
        assert "zygote" not in state["components"]
        with open(f"/proc/{state['components']['apiserver']['pid']}/cmdline", "rb") as f:
            assert f.read().split(b"\0")[3] == b"apiserver"  # python -m k8py apiserver ...
        kubectl = Kubectl(state["api"], str(tmp_path / "home"), state["kubeconfig"])
        kubectl.run("create", "configmap", "live-one")
        for line in proc.stdout:
            if "kubectl" in line and "create  configmaps default/live-one" in line:
                break
        else:
            raise AssertionError("the create was never printed")
    finally:
        proc.terminate()
        assert proc.wait(60) == 0
