"""One watcher in its own process, measuring delivery latency.

Run by apiserver_bench.py so the latency sample is not queued behind the
other watchers' reading in the load generator's event loop. Prints "ready"
once the watch is open, then, after ``events`` events, one JSON line with the
latencies (seconds from the writer's timestamp in the object to receipt).

    python bench/latency_probe.py HOST:PORT PATH EVENTS
"""

from __future__ import annotations

import asyncio
import sys
import time

import aiohttp
import orjson


async def main(addr: str, path: str, events: int) -> None:
    latencies: list[float] = []
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://{addr}{path}", timeout=aiohttp.ClientTimeout(total=300)) as resp:
            print("ready", flush=True)
            buf = b""
            count = 0
            async for chunk in resp.content.iter_any():
                now = time.time()
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    if not line:
                        continue
                    count += 1
                    obj = orjson.loads(line)["object"]
                    sent = ((obj.get("metadata") or {}).get("annotations") or {}).get("bench.k8py.io/sent")
                    if sent:
                        latencies.append(now - float(sent))
                if count >= events:
                    break
    print(orjson.dumps({"count": count, "latencies": latencies}).decode(), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
