"""``k8py controller-manager`` as a process: /healthz, /metrics with the
upstream work-queue families per controller, and leader election between two
processes (one active; the other takes over within the lease duration)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

import pytest

from k8py.client.resources import LEASES, REPLICASETS
from tests.controllers.conftest import eventually
from tests.controllers.test_replicaset import replicaset


def start_manager(kubeconfig: str, *extra: str) -> tuple[subprocess.Popen, int]:
    log = tempfile.TemporaryFile(mode="w+")  # not a pipe: an unread pipe blocks the process once full
    proc = subprocess.Popen([sys.executable, "-m", "k8py", "controller-manager", "--kubeconfig", kubeconfig, "--port", "0", *extra],
                            stdout=subprocess.PIPE, stderr=log, text=True, env={**os.environ})
    line = proc.stdout.readline()
    m = re.search(r"http://127\.0\.0\.1:(\d+)", line)
    if not m:
        log.seek(0)
        raise AssertionError(line + log.read())
    return proc, int(m.group(1))


def stop(proc: subprocess.Popen) -> int:
    proc.terminate()
    try:
        return proc.wait(15)
    finally:
        if proc.poll() is None:
            proc.kill()


def get(port: int, path: str) -> tuple[int, str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return r.status, r.read().decode()


@pytest.fixture
def kubeconfig(server, tmp_path) -> str:
    return server.write_kubeconfig(str(tmp_path / "kubeconfig"))


async def test_the_process_serves_healthz_and_workqueue_metrics(kubeconfig, client):
    proc, port = start_manager(kubeconfig, "--controllers", "replicaset,deployment", "--concurrent-replicaset-syncs", "2")
    try:
        assert get(port, "/healthz") == (200, "ok")
        await client.create(REPLICASETS, replicaset("m", 1))

        def metrics() -> str | None:
            text = get(port, "/metrics")[1]
            return text if re.search(r'workqueue_adds_total\{name="replicaset"\} [1-9]', text) else None

        text = await eventually(metrics)
        for family in ("workqueue_depth", "workqueue_queue_duration_seconds_bucket", "workqueue_work_duration_seconds_bucket",
                       "workqueue_retries_total", "workqueue_unfinished_work_seconds", "workqueue_longest_running_processor_seconds"):
            assert f'{family}{{' in text and 'name="deployment"' in text, family
    finally:
        assert stop(proc) == 0


async def test_an_unknown_controller_name_is_refused_with_the_known_ones(kubeconfig):
    result = subprocess.run([sys.executable, "-m", "k8py", "controller-manager", "--kubeconfig", kubeconfig, "--port", "0",
                             "--controllers", "*,-replicasets"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "'replicasets' is not a known controller; known controllers:" in result.stderr


async def test_two_leader_elected_managers_one_active_the_other_takes_over(kubeconfig, client):
    flags = ("--controllers", "replicaset", "--leader-elect", "--leader-elect-lease-duration", "2",
             "--leader-elect-renew-deadline", "1.5", "--leader-elect-retry-period", "0.2")
    first, _ = start_manager(kubeconfig, *flags, "--leader-elect-identity", "first")
    second = None
    try:
        async def holder():
            try:
                lease = await client.get(LEASES, "kube-system", "kube-controller-manager")
            except Exception:
                return None
            return lease["spec"].get("holderIdentity")

        assert await eventually(holder) == "first"
        second, _ = start_manager(kubeconfig, *flags, "--leader-elect-identity", "second")
        await client.create(REPLICASETS, replicaset("le", 2))
        await eventually(lambda: _pods(client, "app=le", 2))
        assert await holder() == "first"
        first.kill()  # no release: the second must wait out the lease
        first.wait(15)
        killed = time.monotonic()
        assert await eventually(lambda: _is(holder, "second"), timeout=30)
        assert time.monotonic() - killed < 2 + 10  # the lease duration, with room for a loaded machine
        await client.patch(REPLICASETS, "default", "le", {"spec": {"replicas": 3}})
        await eventually(lambda: _pods(client, "app=le", 3))  # the new leader acts
    finally:
        if first.poll() is None:
            stop(first)
        if second is not None:
            assert stop(second) == 0


async def _is(fn, value) -> bool:
    return await fn() == value


async def _pods(client, selector: str, n: int) -> bool:
    from k8py.client.resources import PODS

    return len((await client.list(PODS, "default", label_selector=selector))["items"]) == n
