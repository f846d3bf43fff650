"""An acknowledged write survives ``kill -9``: a child process writes as fast as
it can and prints every acknowledged key; the test kills it mid-stream, reopens
the database and finds every printed key at the printed revision."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from k8py.storage.sqlite import SqliteStorage

WRITER = r"""
import asyncio, sys
from k8py.storage.sqlite import SqliteStorage

async def main(path):
    store = SqliteStorage(path)
    await store.start()
    print("ready", flush=True)

    async def writer(w):
        i = 0
        while True:
            kv = await store.create(f"/crash/{w}/{i}", b"x" * 512)
            sys.stdout.write(f"{kv.key} {kv.mod_revision}\n")
            sys.stdout.flush()
            i += 1

    await asyncio.gather(*(writer(w) for w in range(16)))

asyncio.run(main(sys.argv[1]))
"""


async def test_every_acknowledged_write_survives_kill_9(tmp_path: Path) -> None:
    path = str(tmp_path / "store.db")
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", WRITER, path, stdout=asyncio.subprocess.PIPE
    )
    assert child.stdout is not None
    acked: dict[str, int] = {}
    try:
        async with asyncio.timeout(20):
            assert await child.stdout.readline() == b"ready\n"
        ready = asyncio.get_running_loop().time()

        async def read_acks() -> None:
            assert child.stdout is not None
            async for line in child.stdout:
                if not line.endswith(b"\n"):  # cut short by the kill: not a whole acknowledgement
                    break
                key, revision = line.decode().split()
                acked[key] = int(revision)

        reader = asyncio.create_task(read_acks(), name="crash-test-reader")
        await asyncio.sleep(max(0.0, ready + 1.0 - asyncio.get_running_loop().time()))
        child.kill()  # SIGKILL
        async with asyncio.timeout(10):
            await child.wait()
            await reader
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()

    assert child.returncode == -9
    assert len(acked) > 50, f"the child acknowledged only {len(acked)} writes in a second"

    store = SqliteStorage(path)
    await store.start()
    try:
        stored = {kv.key: kv.mod_revision for kv in (await store.list("/crash/")).kvs}
        missing = sorted(set(acked) - set(stored))
        assert not missing, f"{len(missing)} acknowledged writes lost, e.g. {missing[:5]}"
        assert all(stored[key] == revision for key, revision in acked.items())
        assert await store.current_revision() >= max(acked.values())
    finally:
        await store.close()
