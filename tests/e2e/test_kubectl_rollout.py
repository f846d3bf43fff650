"""``kubectl rollout status|history|undo|restart|pause|resume`` against a
Deployment, with the real kubectl, the real ``k8py controller-manager``
process and the pod driver playing the kubelet."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys

import pytest

from k8py.client.config import ClientConfig
from k8py.client.resources import DEPLOYMENTS, REPLICASETS
from k8py.client.rest import RestClient, RetryPolicy
from tests.controllers.conftest import eventually, running
from tests.support.kube import Kubectl
from tests.support.pod_driver import PodDriver
from tests.support.servers import ServerThread, sqlite_storage

pytestmark = pytest.mark.kubectl


@pytest.fixture
def cluster(tmp_path):
    with ServerThread(sqlite_storage(str(tmp_path / "data")), bookmark_interval=1.0) as server:
        kubectl = Kubectl(server.url, str(tmp_path / "home"))
        manager = subprocess.Popen(
            [sys.executable, "-m", "k8py", "controller-manager", "--kubeconfig", kubectl.kubeconfig, "--port", "0",
             "--controllers", "deployment,replicaset"],
            stdout=subprocess.PIPE, stderr=open(tmp_path / "controller-manager.log", "w"), text=True, env={**os.environ},
        )  # stderr to a file: an unread pipe would block the process once full
        try:
            line = manager.stdout.readline()
            assert "serving /healthz" in line, line + (tmp_path / "controller-manager.log").read_text()
            yield server, kubectl
        finally:
            manager.terminate()
            try:
                assert manager.wait(15) == 0
            finally:
                if manager.poll() is None:
                    manager.kill()


async def kubectl_run(kubectl: Kubectl, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(kubectl.run, *args, check=check, timeout=90)


async def test_rollout_commands_on_a_deployment(cluster):
    server, kubectl = cluster
    async with RestClient(ClientConfig(server=server.url), retry=RetryPolicy(initial=0.02, cap=0.2)) as client:
        async with running(PodDriver(client).run(), "driver"):
            await kubectl_run(kubectl, "create", "deployment", "web", "--image=nginx:1", "--replicas=3")
            out = await kubectl_run(kubectl, "rollout", "status", "deployment/web", "--timeout=60s")
            assert 'deployment "web" successfully rolled out' in out.stdout

            await kubectl_run(kubectl, "set", "image", "deployment/web", "nginx=nginx:2")
            await kubectl_run(kubectl, "annotate", "deployment/web", "kubernetes.io/change-cause=image 2", "--overwrite")
            out = await kubectl_run(kubectl, "rollout", "status", "deployment/web", "--timeout=60s")
            assert "successfully rolled out" in out.stdout

            history = (await kubectl_run(kubectl, "rollout", "history", "deployment/web")).stdout
            assert re.search(r"^1\s+<none>", history, re.M) and re.search(r"^2\s+image 2", history, re.M), history
            detail = (await kubectl_run(kubectl, "rollout", "history", "deployment/web", "--revision=1")).stdout
            assert "nginx:1" in detail

            out = await kubectl_run(kubectl, "rollout", "undo", "deployment/web", "--to-revision=1")
            assert "rolled back" in out.stdout
            await kubectl_run(kubectl, "rollout", "status", "deployment/web", "--timeout=60s")
            d = await client.get(DEPLOYMENTS, "default", "web")
            assert d["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1"
            assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
            rss = (await client.list(REPLICASETS, "default"))["items"]
            back = next(rs for rs in rss if rs["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1")
            assert back["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
            assert back["metadata"]["annotations"]["deployment.kubernetes.io/revision-history"] == "1"
            assert len(rss) == 2  # the old ReplicaSet was reused, not a new one made

            await kubectl_run(kubectl, "rollout", "pause", "deployment/web")

            async def paused_condition():
                st = (await client.get(DEPLOYMENTS, "default", "web")).get("status") or {}
                c = next((c for c in st.get("conditions") or () if c["type"] == "Progressing"), {})
                return c.get("reason") == "DeploymentPaused" and c.get("status") == "Unknown"

            await eventually(paused_condition)
            await kubectl_run(kubectl, "set", "image", "deployment/web", "nginx=nginx:3")
            out = await kubectl_run(kubectl, "rollout", "resume", "deployment/web")
            assert "resumed" in out.stdout
            await kubectl_run(kubectl, "rollout", "status", "deployment/web", "--timeout=60s")
            images = sorted(rs["spec"]["template"]["spec"]["containers"][0]["image"]
                            for rs in (await client.list(REPLICASETS, "default"))["items"])
            assert images == ["nginx:1", "nginx:2", "nginx:3"]

            await kubectl_run(kubectl, "rollout", "restart", "deployment/web")
            await kubectl_run(kubectl, "rollout", "status", "deployment/web", "--timeout=60s")
            rss = (await client.list(REPLICASETS, "default"))["items"]
            assert len(rss) == 4
            restarted = [rs for rs in rss if "kubectl.kubernetes.io/restartedAt" in
                         ((rs["spec"]["template"]["metadata"].get("annotations")) or {})]
            assert len(restarted) == 1 and restarted[0]["spec"]["replicas"] == 3
            out = (await kubectl_run(kubectl, "get", "deployment", "web")).stdout
            assert re.search(r"web\s+3/3\s+3\s+3", out), out
