"""Unknown fields are dropped before storing (Warn/Ignore), as typed decoding does upstream."""

from __future__ import annotations

import json
import urllib.request


def _request(url: str, method: str, body: dict | None = None, content_type: str = "application/json"):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": content_type})
    with urllib.request.urlopen(req) as resp:
        return resp.status, resp.headers.get_all("Warning") or [], json.loads(resp.read())


def test_an_unknown_field_is_warned_about_and_not_stored(apiserver):
    url = f"{apiserver.url}/api/v1/namespaces/default/configmaps"
    status, warnings, created = _request(url, "POST", {"metadata": {"name": "c", "bogus": 1}, "data": {"a": "b"}, "extra": True})
    assert status == 201
    assert sorted(warnings) == ['299 - "unknown field \\"extra\\""', '299 - "unknown field \\"metadata.bogus\\""']
    assert "extra" not in created and "bogus" not in created["metadata"]
    _, _, stored = _request(f"{url}/c", "GET")
    assert "extra" not in stored and "bogus" not in stored["metadata"] and stored["data"] == {"a": "b"}


def test_a_merge_patch_adding_an_unknown_field_does_not_store_it(apiserver):
    url = f"{apiserver.url}/api/v1/namespaces/default/configmaps"
    _request(url, "POST", {"metadata": {"name": "c"}, "data": {"a": "b"}})
    status, _, patched = _request(f"{url}/c?fieldValidation=Ignore", "PATCH", {"extra": 1, "data": {"x": "y"}}, "application/merge-patch+json")
    assert status == 200 and "extra" not in patched and patched["data"] == {"a": "b", "x": "y"}
