"""The server's own writes reach its watch cache without a decode
(``watch.stored_hints``), and nothing a client sees changes: every cached
object is byte for byte the decode of what the store holds, and a watcher
receives exactly those bytes."""

from __future__ import annotations

import urllib.request

import orjson

from k8py.apiserver.watch.cached_object import build_cached_object
from tests.support.servers import ServerThread, sqlite_storage

_PODS = "/api/v1/namespaces/default/pods"


def _call(server: ServerThread, method: str, path: str, body: dict | None = None,
          ctype: str = "application/json") -> dict:
    req = urllib.request.Request(server.url + path, method=method, data=None if body is None else orjson.dumps(body),
                                 headers={"Content-Type": ctype})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return orjson.loads(resp.read())


def _pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": "web", "i": name}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def test_writes_are_cached_from_their_notes_exactly_as_decoded(tmp_path):
    with ServerThread(sqlite_storage(str(tmp_path))) as server:
        assert server.server is not None
        cacher = server.server.cacher
        start = _call(server, "GET", _PODS)["metadata"]["resourceVersion"]
        watch = urllib.request.urlopen(f"{server.url}{_PODS}?watch=true&resourceVersion={start}", timeout=60)
        used = cacher.hints.used
        for i in range(5):
            _call(server, "POST", f"{_PODS}?fieldManager=tester", _pod(f"p{i}"))
        _call(server, "PATCH", f"{_PODS}/p0/status", {"status": {"phase": "Running", "podIP": "10.0.0.9"}},
              "application/strategic-merge-patch+json")
        _call(server, "PATCH", f"{_PODS}/p1", {"metadata": {"labels": {"app": "db"}}},
              "application/merge-patch+json")
        _call(server, "DELETE", f"{_PODS}/p2")  # an unbound pod is deleted at once
        _call(server, "POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
        _call(server, "POST", f"{_PODS}/p3/binding", {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p3"},
                                                      "target": {"kind": "Node", "name": "n1"}})
        _call(server, "DELETE", f"{_PODS}/p3")  # a bound one is marked, for its kubelet to stop
        lines = [watch.readline() for _ in range(5 + 2 + 1 + 2)]
        watch.close()

        types = [orjson.loads(line)["type"] for line in lines]
        assert types == ["ADDED"] * 5 + ["MODIFIED"] * 2 + ["DELETED"] + ["MODIFIED"] * 2
        assert orjson.loads(lines[9])["object"]["metadata"]["deletionTimestamp"]
        # the cache holds, for every pod, exactly the decode of the stored value
        definition = next(d for d in server.server.registry if d.plural == "pods" and d.group == "")
        cache = cacher.caches[definition.storage_key_resource]
        stored = server.call(server.server.storage.list("/registry/pods/default/"))
        assert len(stored.kvs) == len([k for k in cache.objects if k.startswith("/registry/pods/default/")])
        for kv in stored.kvs:
            cached = cache.objects[kv.key]
            decoded = build_cached_object(definition, kv.key, kv.value, kv.mod_revision)
            assert (cached.data, cached.labels, cached.fields, cached.namespace, cached.name) == \
                (decoded.data, decoded.labels, decoded.fields, decoded.namespace, decoded.name)
        # and the watcher was sent those bytes
        assert orjson.loads(lines[5])["object"] == orjson.loads(cache.objects["/registry/pods/default/p0"].data)
        assert cacher.hints.used - used >= 9, "creates, updates, the bind and the graceful delete were built from their notes"
        assert orjson.loads(lines[6])["object"]["metadata"]["labels"] == {"app": "db", "i": "p1"}


def test_an_encrypted_store_is_not_noted_and_its_cache_still_holds_the_plaintext(tmp_path):
    """The encrypting store's watch hands out decrypted copies, never the bytes
    a write gave it: the server makes no notes there, and the cache decodes."""
    cfg = tmp_path / "enc.yaml"
    cfg.write_text("""apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
- resources: [secrets]
  providers:
  - aescbc:
      keys:
      - name: key1
        secret: MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=
  - identity: {}
""")
    with ServerThread(sqlite_storage(str(tmp_path / "data")), encryption_provider_config=str(cfg)) as server:
        assert server.server is not None
        assert server.server.store.note_stored is None
        _call(server, "POST", "/api/v1/namespaces/default/secrets", {"metadata": {"name": "s"}, "data": {"k": "djE="}})
        got = _call(server, "GET", "/api/v1/namespaces/default/secrets/s")
        assert got["data"] == {"k": "djE="}
        assert server.server.cacher.hints.used == 0
