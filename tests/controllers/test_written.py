"""WrittenObjects: a controller's own last write stands in for a lagging cache, never for a newer one."""

from __future__ import annotations

from k8py.controllers.written import WrittenObjects


def obj(rv: str, uid: str = "u1", **extra) -> dict:
    return {"metadata": {"name": "d", "namespace": "default", "uid": uid, "resourceVersion": rv,
                         "managedFields": [{"manager": "x"}]}, **extra}


def test_the_written_object_stands_in_until_the_cache_catches_up():
    written = WrittenObjects()
    written.remember("default/d", obj("12", status={"replicas": 2}))
    cached = obj("10")
    got = written.latest("default/d", cached)
    assert got["metadata"]["resourceVersion"] == "12" and got["status"] == {"replicas": 2}
    assert "managedFields" not in got["metadata"]
    assert written.latest("default/d", obj("12"))["metadata"]["resourceVersion"] == "12"
    assert len(written) == 0  # the cache has it: forgotten, the cache is the truth again
    assert written.latest("default/d", cached) is cached


def test_a_newer_cache_or_another_object_wins():
    written = WrittenObjects()
    written.remember("default/d", obj("12"))
    newer = obj("15")  # someone else's edit after our write
    assert written.latest("default/d", newer) is newer and len(written) == 0
    written.remember("default/d", obj("20", uid="old"))
    recreated = obj("3", uid="new")  # deleted and created again under the same name
    assert written.latest("default/d", recreated) is recreated
    written.remember("default/d", obj("x"))
    assert written.latest("default/d", cached := obj("1")) is cached  # unparsable: trust the cache
    written.remember("default/d", obj("30"))
    written.forget("default/d")
    assert written.latest("default/d", cached) is cached
