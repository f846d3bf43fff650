"""An acknowledged write survives SIGKILL of the API server (embedded store)."""

from __future__ import annotations

import asyncio
import threading
import time

import aiohttp
import orjson

from tests.support.servers import ServerProcess


async def _write_until(url: str, stop: threading.Event, acked: list[str], failed: list[str]) -> None:
    async with aiohttp.ClientSession() as session:

        async def writer(w: int) -> None:
            i = 0
            while not stop.is_set():
                name = f"cm-{w}-{i}"
                i += 1
                body = orjson.dumps({"metadata": {"name": name}, "data": {"n": str(i)}})
                try:
                    async with session.post(
                        f"{url}/api/v1/namespaces/default/configmaps",
                        data=body,
                        headers={"Content-Type": "application/json"},
                    ) as resp:
                        await resp.read()
                        if resp.status == 201:
                            acked.append(name)
                except (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError):
                    failed.append(name)
                    return

        await asyncio.gather(*(writer(w) for w in range(16)))


def test_every_acknowledged_write_survives_sigkill(tmp_path):
    data_dir = str(tmp_path / "data")
    server = ServerProcess(data_dir).start()
    stop = threading.Event()
    acked: list[str] = []
    failed: list[str] = []
    writer = threading.Thread(target=lambda: asyncio.run(_write_until(server.url, stop, acked, failed)))
    writer.start()
    deadline = time.monotonic() + 120
    while len(acked) < 200 and not failed and time.monotonic() < deadline:  # however slow the machine is
        time.sleep(0.01)
    assert len(acked) >= 200, f"the writer should have had many writes acknowledged (failed: {failed[:3]})"
    server.kill()  # SIGKILL while 16 writers have writes in flight
    stop.set()
    writer.join(30)

    with ServerProcess(data_dir) as restarted:

        async def stored_names() -> set[str]:
            async with aiohttp.ClientSession() as session:
                async with session.get(f"{restarted.url}/api/v1/namespaces/default/configmaps") as resp:
                    assert resp.status == 200
                    body = orjson.loads(await resp.read())
            return {item["metadata"]["name"] for item in body["items"]}

        names = asyncio.run(stored_names())
    missing = [name for name in acked if name not in names]
    assert not missing, f"{len(missing)} acknowledged writes lost, e.g. {missing[:5]}"
    print(f"{len(acked)} writes acknowledged before SIGKILL; all {len(acked)} present after restart")
