"""The status manager against a real API server: batched, only changes, never stale."""

from __future__ import annotations

import asyncio

from k8py.client.config import ClientConfig
from k8py.client.resources import PODS
from k8py.client.rest import RestClient
from k8py.kubelet.status_manager import StatusManager
from tests.support.servers import ServerThread, sqlite_storage


def _status(phase: str, n: int) -> dict:
    return {"phase": phase, "conditions": [{"type": "Ready", "status": "False", "reason": f"r{n}"}],
            "containerStatuses": [{"name": "c", "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}, "restartCount": n}]}


def test_a_burst_of_statuses_becomes_few_writes_ending_on_the_newest(tmp_path) -> None:
    with ServerThread(sqlite_storage(str(tmp_path / "api"))) as server:
        async def scenario() -> None:
            client = RestClient(ClientConfig(server=server.url))
            try:
                pod = await client.create(PODS, {"metadata": {"name": "p", "namespace": "default"},
                                                 "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "busybox"}]}})
                sm = StatusManager(client, concurrency=4)
                runner = asyncio.create_task(sm.run())
                for n in range(50):
                    sm.set_status(pod, _status("Running", n))
                    if n % 10 == 0:
                        await asyncio.sleep(0)
                for _ in range(200):
                    if sm.synced(pod["metadata"]["uid"]):
                        break
                    await asyncio.sleep(0.05)
                assert sm.synced(pod["metadata"]["uid"])
                assert 1 <= sm.writes <= 10, sm.writes
                got = await client.get(PODS, "default", "p")
                assert got["status"]["containerStatuses"][0]["restartCount"] == 49
                before = sm.writes
                sm.set_status(pod, _status("Running", 49))  # unchanged: nothing is sent
                await asyncio.sleep(0.2)
                assert sm.writes == before
                term = _status("Succeeded", 49)
                term["containerStatuses"][0]["state"] = {"terminated": {"exitCode": 0, "reason": "Completed"}}
                sm.set_status(pod, term)
                for _ in range(200):
                    if sm.synced(pod["metadata"]["uid"]) and sm.writes > before:
                        break
                    await asyncio.sleep(0.05)
                got = await client.get(PODS, "default", "p")
                assert got["status"]["phase"] == "Succeeded"
                state = got["status"]["containerStatuses"][0]["state"]
                assert list(state) == ["terminated"], state  # the merge patch nulled "running"
                assert (state["terminated"]["exitCode"], state["terminated"]["reason"]) == (0, "Completed")
                runner.cancel()
                try:
                    await runner
                except asyncio.CancelledError:
                    pass
            finally:
                await client.close()

        asyncio.run(scenario())
