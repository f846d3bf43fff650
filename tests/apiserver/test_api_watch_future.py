"""A watch from a resourceVersion the server has not reached yet streams what comes after it."""

from __future__ import annotations

import json
import threading
import urllib.request


def _post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as resp:
        return json.loads(resp.read())


def test_a_watch_from_a_future_rv_delivers_only_later_events(apiserver):
    base = f"{apiserver.url}/api/v1/namespaces/default/configmaps"
    first = _post(base, {"metadata": {"name": "a"}})
    future = int(first["metadata"]["resourceVersion"]) + 2
    lines: list[dict] = []

    def watch() -> None:
        with urllib.request.urlopen(f"{base}?watch=true&resourceVersion={future}&timeoutSeconds=3") as resp:
            for line in resp:
                lines.append(json.loads(line))

    thread = threading.Thread(target=watch)
    thread.start()
    created = [_post(base, {"metadata": {"name": f"b{i}"}}) for i in range(4)]
    thread.join(10)
    later = [c["metadata"]["name"] for c in created if int(c["metadata"]["resourceVersion"]) > future]
    assert [e["object"]["metadata"]["name"] for e in lines] == later
    assert all(e["type"] == "ADDED" for e in lines) and later
