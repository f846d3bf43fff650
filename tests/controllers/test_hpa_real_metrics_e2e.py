"""The HPA on real metrics, as processes: an API server, ``k8py
controller-manager`` (HPA sync every second, a 4 s downscale stabilization,
both by flags), ``k8py scheduler`` and a ``k8py kubelet`` on the process
runtime. The Deployment's pods are real processes that burn CPU while a
file in a hostPath volume exists; the kubelet measures them (``/proc``, or
their cgroups), the API server serves that as ``metrics.k8s.io`` PodMetrics,
and the HPA reads those — nothing is injected. A watch on the Deployment
sees it scaled up while the pods burn, and back down to one when the burn
stops; ``kubectl get hpa`` shows the targets as upstream does."""

from __future__ import annotations

import asyncio
import os
import random
import re
import subprocess
import sys
import time
from typing import Any, Iterator

import pytest

from k8py.client.config import ClientConfig
from k8py.client.resources import DEPLOYMENTS, HORIZONTAL_POD_AUTOSCALERS, POD_METRICS
from k8py.client.rest import RestClient
from tests.support.kube import Kubectl
from tests.support.kubelet import KubeletProcess
from tests.support.servers import ServerThread, sqlite_storage

pytestmark = [pytest.mark.kubectl, pytest.mark.slow, pytest.mark.timeout(300)]

# ~10 ms of CPU in every 100 ms while /ctl/burn exists: up to 100m per pod against
# a 20m request, ten times the 50% target (a loaded machine gives less, still far
# above it), yet light on a shared machine; idle, it wakes 5 times a second
BURN = r"""
import os, time
while True:
    if os.path.exists("/ctl/burn"):
        end = time.perf_counter() + 0.01
        while time.perf_counter() < end:
            pass
        time.sleep(0.09)
    else:
        time.sleep(0.2)
"""


def _deployment(ctl_dir: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "burn", "namespace": "default"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "burn"}},
                     "template": {"metadata": {"labels": {"app": "burn"}}, "spec": {
                         "terminationGracePeriodSeconds": 1,
                         "containers": [{"name": "burn", "image": "python:3", "command": ["python3", "-c", BURN],
                                         "resources": {"requests": {"cpu": "20m"}},
                                         "volumeMounts": [{"name": "ctl", "mountPath": "/ctl"}]}],
                         "volumes": [{"name": "ctl", "hostPath": {"path": ctl_dir, "type": "Directory"}}]}}}}


@pytest.fixture
def stack(tmp_path) -> Iterator[tuple[ServerThread, Kubectl]]:
    with ServerThread(sqlite_storage(str(tmp_path / "data")), bookmark_interval=1.0,
                      service_cidr=f"127.{random.randint(193, 207)}.{random.randint(0, 255)}.0/24") as server:
        kubectl = Kubectl(server.url, str(tmp_path / "home"))
        kc = kubectl.kubeconfig
        commands = (
            ["controller-manager", "--kubeconfig", kc, "--port", "0",
             "--controllers", "deployment,replicaset,horizontalpodautoscaling,serviceaccount,nodeipam",
             "--cluster-cidr", f"127.{random.randint(65, 127)}.0.0/16",
             "--horizontal-pod-autoscaler-sync-period", "1", "--horizontal-pod-autoscaler-downscale-stabilization", "4"],
            ["scheduler", "--kubeconfig", kc, "--port", "0"],
        )
        logs = [open(tmp_path / f"{cmd[0]}.log", "w") for cmd in commands]
        procs = [subprocess.Popen([sys.executable, "-m", "k8py", *cmd], stdout=subprocess.PIPE, stderr=log, text=True,
                                  env={**os.environ}) for cmd, log in zip(commands, logs)]
        kubelet = KubeletProcess(kc, str(tmp_path / "kubelet"), node_name="node-1")
        try:
            for proc, cmd in zip(procs, commands):
                line = proc.stdout.readline()
                assert "/healthz" in line, line + (tmp_path / f"{cmd[0]}.log").read_text()
            kubelet.start()
            yield server, kubectl
        finally:
            kubectl.run("delete", "hpa,deployments", "--all", "--wait=false", check=False)
            kubelet.stop()  # first: a running kubelet would restart what is killed
            kubelet.kill_containers()
            for proc in procs:
                proc.terminate()
            for proc in procs:
                try:
                    proc.wait(20)
                finally:
                    if proc.poll() is None:
                        proc.kill()
            for log in logs:
                log.close()


async def _hpa_seen(client: RestClient, want, timeout: float) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """Watch the HPA until ``want(status)``; that HPA."""
    async def watch() -> dict[str, Any]:
        current = await client.get(HORIZONTAL_POD_AUTOSCALERS, "default", "burn")
        if want(current.get("status") or {}):
            return current
        while True:
            stream = client.watch(HORIZONTAL_POD_AUTOSCALERS, "default", field_selector="metadata.name=burn",
                                  resource_version=current["metadata"]["resourceVersion"])
            async for change in stream:
                if change.type in ("ADDED", "MODIFIED"):
                    current = change.object
                    if want(current.get("status") or {}):
                        return current

    return await asyncio.wait_for(watch(), timeout)


async def _replicas_seen(client: RestClient, want, timeout: float) -> int:  # type: ignore[no-untyped-def]
    """Watch the Deployment until ``want(spec.replicas)``; the count seen."""
    async def watch() -> int:
        current = await client.get(DEPLOYMENTS, "default", "burn")
        if want(current["spec"]["replicas"]):
            return int(current["spec"]["replicas"])
        while True:
            stream = client.watch(DEPLOYMENTS, "default", field_selector="metadata.name=burn",
                                  resource_version=current["metadata"]["resourceVersion"])
            async for change in stream:
                if change.type in ("ADDED", "MODIFIED"):
                    current = change.object
                    if want(current["spec"]["replicas"]):
                        return int(current["spec"]["replicas"])

    return await asyncio.wait_for(watch(), timeout)


async def test_a_cpu_burning_deployment_is_scaled_up_on_its_real_usage_and_back_down_when_it_stops(stack, tmp_path):
    server, kubectl = stack
    ctl = tmp_path / "ctl"
    ctl.mkdir()
    (ctl / "burn").write_text("on")
    async with RestClient(ClientConfig(server=server.url)) as client:
        await client.create(DEPLOYMENTS, _deployment(str(ctl)), namespace="default")
        out = (await asyncio.to_thread(kubectl.run, "autoscale", "deployment", "burn", "--cpu-percent=50",
                                       "--min=1", "--max=3")).stdout
        assert "horizontalpodautoscaler.autoscaling/burn autoscaled" in out

        # the pod's own CPU, as the kubelet measured it, through metrics.k8s.io
        async def measured() -> dict[str, Any]:
            while True:
                items = (await client.list(POD_METRICS, "default", label_selector="app=burn"))["items"]
                if items and items[0]["containers"]:
                    return items[0]
                await asyncio.sleep(0.5)

        started = time.monotonic()

        def log(what: str) -> None:  # the timeline, for a failure's output (-s)
            print(f"{time.monotonic() - started:7.1f}s {what}", file=sys.stderr)

        metrics = await asyncio.wait_for(measured(), 120)
        log("first PodMetrics")
        assert metrics["containers"][0]["name"] == "burn" and metrics["containers"][0]["usage"]["cpu"].endswith("n")

        # the status written with the scale-up: the measurement that drove it
        hpa = await _hpa_seen(client, lambda s: (s.get("desiredReplicas") or 0) > 1, timeout=120)
        current = hpa["status"]["currentMetrics"][0]["resource"]["current"]
        assert current["averageUtilization"] > 50
        assert {c["type"]: c["reason"] for c in hpa["status"]["conditions"]}["ScalingActive"] == "ValidMetricFound"
        scaled_to = await _replicas_seen(client, lambda n: n > 1, timeout=60)
        assert 2 <= scaled_to <= 3
        log(f"scaled to {scaled_to} at {current['averageUtilization']}%")
        table = (await asyncio.to_thread(kubectl.run, "get", "hpa", "burn")).stdout.splitlines()
        assert table[0].split()[:4] == ["NAME", "REFERENCE", "TARGETS", "MINPODS"]
        assert re.search(r"\bDeployment/burn\s+cpu: \d+%/50%\s+1\s+3\s+[123]\s", table[1]), table
        events = (await asyncio.to_thread(kubectl.run, "get", "events", "--field-selector",
                                          "involvedObject.kind=HorizontalPodAutoscaler")).stdout
        assert "SuccessfulRescale" in events and "cpu resource utilization (percentage of request) above target" in events

        (ctl / "burn").unlink()  # the burn stops: usage falls to ~0, and after the window, one replica
        stopped = time.monotonic()
        assert await _replicas_seen(client, lambda n: n == 1, timeout=120) == 1
        # not before the 4 s window has passed over the last high recommendation (made at the
        # unlink at the earliest, since the CPU rate covers at least the second before)
        assert time.monotonic() - stopped >= 3.0
        log("scaled back to 1")
        hpa = await _hpa_seen(client, lambda s: s.get("desiredReplicas") == 1, timeout=30)
        assert hpa["status"]["currentMetrics"][0]["resource"]["current"]["averageUtilization"] < 50
        table = (await asyncio.to_thread(kubectl.run, "get", "hpa", "burn")).stdout.splitlines()
        assert re.search(r"cpu: \d+%/50%", table[1]), table
