"""Jobs, a DaemonSet and a StatefulSet on the whole stack as processes (API
server, ``k8py controller-manager``, ``k8py scheduler``, a simulated ``k8py
kubelet`` of 3 nodes), driven by the real kubectl."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.e2e.test_full_stack_deployment import cluster, wait_for  # noqa: F401 - the fixture

pytestmark = [pytest.mark.kubectl, pytest.mark.slow]

SIMULATED = "k8py.io/simulated-run-seconds"


def _job(name: str, *, exit_code: int = 0, **spec: object) -> str:
    annotations = {SIMULATED: "0.3", "k8py.io/simulated-exit-code": str(exit_code)}
    return yaml.safe_dump({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": {
        "template": {"metadata": {"annotations": annotations}, "spec": {
            "restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}}, **spec}})


def test_jobs_complete_and_fail_on_a_full_stack(cluster):  # noqa: F811
    kubectl = cluster
    kubectl.run("apply", "-f", "-", input=_job("indexed", completions=3, parallelism=2, completionMode="Indexed"))
    kubectl.run("apply", "-f", "-", input=_job("broken", exit_code=1, backoffLimit=1))
    out = kubectl.run("wait", "--for=condition=complete", "job/indexed", "--timeout=90s", timeout=120).stdout
    assert out == "job.batch/indexed condition met\n"
    job = json.loads(kubectl.run("get", "job", "indexed", "-o", "json").stdout)
    assert job["status"]["completedIndexes"] == "0-2" and job["status"]["succeeded"] == 3
    out = kubectl.run("wait", "--for=condition=failed", "job/broken", "--timeout=90s", timeout=120).stdout
    assert out == "job.batch/broken condition met\n"
    job = json.loads(kubectl.run("get", "job", "broken", "-o", "json").stdout)
    assert job["status"]["failed"] == 2
    assert [c["reason"] for c in job["status"]["conditions"] if c["type"] == "Failed"] == ["BackoffLimitExceeded"]


def test_a_daemonset_and_a_statefulset_roll_out_on_a_full_stack(cluster):  # noqa: F811
    kubectl = cluster
    template = {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
          "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": template}}
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
           "spec": {"replicas": 3, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                    "template": {**template, "metadata": {"labels": {"app": "db"}}}}}
    kubectl.run("apply", "-f", "-", input=yaml.safe_dump_all([ds, sts]))
    assert "successfully rolled out" in kubectl.run(
        "rollout", "status", "daemonset/agent", "--timeout=90s", timeout=120).stdout
    kubectl.run("rollout", "status", "statefulset/db", "--timeout=90s", timeout=120)

    def pods(label: str) -> list[dict]:
        items = json.loads(kubectl.run("get", "pods", "-l", label, "-o", "json").stdout)["items"]
        return [p for p in items if not p["metadata"].get("deletionTimestamp")]

    agents = pods("app=x")
    assert len(agents) == 3 and len({p["spec"]["nodeName"] for p in agents}) == 3
    dbs = wait_for(lambda: len(pods("app=db")) == 3 and all(p["status"].get("phase") == "Running"
                                                            for p in pods("app=db")) and pods("app=db"), "3 db pods")
    assert sorted(p["metadata"]["name"] for p in dbs) == ["db-0", "db-1", "db-2"]

    kubectl.run("set", "image", "statefulset/db", "c=nginx:2")
    kubectl.run("rollout", "status", "statefulset/db", "--timeout=90s", timeout=120)
    kubectl.run("rollout", "undo", "statefulset/db")
    kubectl.run("rollout", "status", "statefulset/db", "--timeout=90s", timeout=120)
    images = wait_for(lambda: {p["spec"]["containers"][0]["image"] for p in pods("app=db")} == {"nginx:1"}, "undo")
    assert images
