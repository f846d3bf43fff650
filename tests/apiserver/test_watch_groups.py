"""Many watchers over HTTP, each with exactly its own stream.

The watch cache decides each event once per distinct selection and encodes
each frame once for the watchers owed it (``watch.watcher_group``); one-object
watches are indexed by name. Seen from the clients nothing of that shows:
watchers of one selection get byte-identical streams, other selections get
their own transitions, a watcher started from a resourceVersion mid-way gets
exactly what followed it.
"""

from __future__ import annotations

import threading
import time
import urllib.request

import orjson

from tests.support.servers import ServerThread, sqlite_storage

_BASE = "/api/v1/namespaces/default/configmaps"


class LineWatch:
    """A watch read line by line (http.client undoes the chunking) on a thread."""

    def __init__(self, url: str) -> None:
        self.lines: list[bytes] = []
        self._cond = threading.Condition()
        self._resp = urllib.request.urlopen(url, timeout=120)
        self._thread = threading.Thread(target=self._read, name="line-watch", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for line in self._resp:
                with self._cond:
                    self.lines.append(line)
                    self._cond.notify_all()
        except Exception:  # the server went away at the end of the test
            pass

    def wait(self, n: int, timeout: float = 90.0) -> list[tuple[str, str]]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.lines) < n:
                left = deadline - time.monotonic()
                assert left > 0, f"{len(self.lines)} of {n} events within {timeout}s: {self.summary()}"
                self._cond.wait(left)
            return self.summary()

    def summary(self) -> list[tuple[str, str]]:
        out = []
        for line in self.lines:
            event = orjson.loads(line)
            out.append((event["type"], event["object"]["metadata"]["name"]))
        return out


def _request(method: str, url: str, body: dict | None = None) -> dict:
    req = urllib.request.Request(url, method=method, data=orjson.dumps(body) if body is not None else None,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return orjson.loads(resp.read())


def _cm(name: str, app: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"app": app}}}


def test_watchers_of_one_selection_get_one_stream_and_the_others_their_own(tmp_path):
    n = 12
    with ServerThread(sqlite_storage(str(tmp_path / "data"))) as server:
        url = server.url + _BASE
        rv0 = _request("GET", url)["metadata"]["resourceVersion"]
        watch = f"{url}?watch=true&timeoutSeconds=120&resourceVersion={rv0}"
        everything = [LineWatch(watch) for _ in range(15)]
        web = [LineWatch(f"{watch}&labelSelector=app%3Dweb") for _ in range(4)]
        one = LineWatch(f"{watch}&fieldSelector=metadata.name%3Dcm-3")
        other_one = LineWatch(f"{watch}&fieldSelector=metadata.name%3Dcm-8")

        for i in range(n):  # even ones are web, odd ones db
            created = _request("POST", url, _cm(f"cm-{i}", "web" if i % 2 == 0 else "db"))
        rv_created = created["metadata"]["resourceVersion"]
        late = LineWatch(f"{url}?watch=true&timeoutSeconds=120&resourceVersion={rv_created}")
        late_web = LineWatch(f"{url}?watch=true&timeoutSeconds=120&labelSelector=app%3Dweb&resourceVersion={rv_created}")
        for i in range(n):  # every one swaps: web -> db, db -> web
            _request("PUT", f"{url}/cm-{i}", _cm(f"cm-{i}", "db" if i % 2 == 0 else "web"))
        for i in range(n):
            _request("DELETE", f"{url}/cm-{i}")

        names = [f"cm-{i}" for i in range(n)]
        expected_all = [("ADDED", m) for m in names] + [("MODIFIED", m) for m in names] + [("DELETED", m) for m in names]
        for w in everything:
            assert w.wait(3 * n) == expected_all
        assert all(w.lines == everything[0].lines for w in everything)  # byte for byte one stream
        rvs = [int(orjson.loads(line)["object"]["metadata"]["resourceVersion"]) for line in everything[0].lines]
        assert rvs == sorted(rvs) and len(set(rvs)) == len(rvs)

        even, odd = names[0::2], names[1::2]
        expected_web = ([("ADDED", m) for m in even]
                        + [x for i in range(n) for x in [("DELETED" if i % 2 == 0 else "ADDED", names[i])]]
                        + [("DELETED", m) for m in odd])
        for w in web:
            assert w.wait(len(expected_web)) == expected_web
        assert all(w.lines == web[0].lines for w in web)
        assert one.wait(3) == [("ADDED", "cm-3"), ("MODIFIED", "cm-3"), ("DELETED", "cm-3")]
        assert other_one.wait(3) == [("ADDED", "cm-8"), ("MODIFIED", "cm-8"), ("DELETED", "cm-8")]

        assert late.wait(2 * n) == expected_all[n:]
        expected_late_web = expected_web[len(even):]
        assert late_web.wait(len(expected_late_web)) == expected_late_web
        # the late watchers joined groups mid-way: the same bytes as the early ones from there on
        assert late.lines == everything[0].lines[n:]
