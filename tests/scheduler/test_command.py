"""``k8py scheduler`` end to end: a real process, the real kubectl, leader failover."""

from __future__ import annotations

import asyncio
import re
import time

import pytest

from k8py.client.resources import LEASES, PODS
from tests.scheduler.conftest import create_nodes, eventually, node, pod, wait_bound
from tests.scheduler.scheduler_process import SchedulerProcess


async def test_the_command_binds_pods_and_serves_health_and_metrics(apiserver, client, tmp_path):
    kubeconfig = apiserver.write_kubeconfig(str(tmp_path / "kubeconfig"))
    await create_nodes(client, node("n1"))
    with SchedulerProcess(kubeconfig) as sched:
        assert sched.get("/healthz") == (200, "ok")
        await asyncio.to_thread(sched.wait_ready)
        await client.create(PODS, pod("p", cpu="100m"))
        assert await wait_bound(client, "p") == "n1"

        def scheduled_metric():
            status, text = sched.get("/metrics")
            return status == 200 and 'scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 1.0' in text
        await eventually(lambda: asyncio.to_thread(scheduled_metric))
        text = sched.get("/metrics")[1]
        assert 'scheduler_pending_pods{queue="active"} 0.0' in text
        assert "scheduler_scheduling_attempt_duration_seconds_bucket" in text
        assert 'scheduler_cache_size{type="nodes"} 1.0' in text


@pytest.mark.kubectl
async def test_kubectl_describe_shows_failed_scheduling(apiserver, client, kubectl, tmp_path):
    kubeconfig = apiserver.write_kubeconfig(str(tmp_path / "kubeconfig"))
    gpu = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    await create_nodes(client, node("small", cpu="1"), node("gpu-1", taints=gpu), node("gpu-2", taints=gpu))
    with SchedulerProcess(kubeconfig):
        await client.create(PODS, pod("big", cpu="2"))
        expected = ("0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {dedicated: gpu}. "
                    "preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, "
                    "2 Preemption is not helpful for scheduling.")

        def described():
            out = kubectl.run("describe", "pod", "big").stdout
            return out if "FailedScheduling" in out else None
        out = await eventually(lambda: asyncio.to_thread(described), timeout=30)
        line = next(l for l in out.splitlines() if "FailedScheduling" in l)
        assert re.search(r"Warning\s+FailedScheduling\s+\S+\s+default-scheduler\s+", line), line
        assert line.rstrip().endswith(expected), line
        assert re.search(r"PodScheduled\s+False", out)


async def test_leader_failover_within_the_lease_duration(apiserver, client, tmp_path):
    kubeconfig = apiserver.write_kubeconfig(str(tmp_path / "kubeconfig"))
    config = tmp_path / "config.yaml"
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "leaderElection:\n  leaderElect: true\n  leaseDuration: 3s\n  renewDeadline: 2s\n  retryPeriod: 200ms\n")
    await create_nodes(client, node("n1"))
    first = SchedulerProcess(kubeconfig, "--config", str(config), "--identity", "first").start()
    second = None
    try:
        await asyncio.to_thread(first.wait_ready)
        second = SchedulerProcess(kubeconfig, "--config", str(config), "--identity", "second").start()
        lease = await client.get(LEASES, "kube-system", "kube-scheduler")
        assert lease["spec"]["holderIdentity"] == "first"
        await client.create(PODS, pod("before"))
        assert await wait_bound(client, "before") == "n1"
        status, body = await asyncio.to_thread(second.get, "/readyz")
        assert status == 503 and "not the leader" in body
        first.kill()  # SIGKILL: no release, the lease must expire
        killed = time.monotonic()
        await client.create(PODS, pod("after"))
        assert await wait_bound(client, "after", timeout=30) == "n1"
        took = time.monotonic() - killed
        lease = await client.get(LEASES, "kube-system", "kube-scheduler")
        assert lease["spec"]["holderIdentity"] == "second"
        assert took < 3 + 10  # the lease duration plus generous slack for a loaded machine
    finally:
        first.kill()
        if second is not None:
            second.kill()
