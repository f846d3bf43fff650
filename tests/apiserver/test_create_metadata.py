"""resourceVersion and generateName on writes, as upstream's registry reads them.

Upstream's versioner parses a resourceVersion as an unsigned integer ("" and
"0" mean none): a create refuses only a version that parses to non-zero (an
unparsable one is cleared and the object created); an update with an
unparsable one fails with the versioner's error (a 500 naming the field), and
"0" is an unconditional update. ``generateName`` is used only when ``name``
is empty.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

_CMS = "/api/v1/namespaces/default/configmaps"


def _send(url: str, method: str, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(f"{url}{path}", data=json.dumps(body).encode(), method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_a_create_with_an_unparsable_resource_version_clears_it_and_creates(apiserver):
    code, body = _send(apiserver.url, "POST", _CMS, {"metadata": {"name": "a", "resourceVersion": "v1"}})
    assert code == 201, body
    assert body["metadata"]["resourceVersion"].isdigit()


def test_a_create_with_resource_version_zero_creates(apiserver):
    code, body = _send(apiserver.url, "POST", _CMS, {"metadata": {"name": "z", "resourceVersion": "0"}})
    assert code == 201, body


def test_a_create_with_a_numeric_resource_version_is_refused(apiserver):
    code, body = _send(apiserver.url, "POST", _CMS, {"metadata": {"name": "n", "resourceVersion": "5"}})
    assert code == 400
    assert body["message"] == "resourceVersion should not be set on objects to be created"


def test_an_update_with_an_unparsable_resource_version_fails_as_upstreams_versioner(apiserver):
    assert _send(apiserver.url, "POST", _CMS, {"metadata": {"name": "u"}})[0] == 201
    code, body = _send(apiserver.url, "PUT", f"{_CMS}/u", {"metadata": {"name": "u", "resourceVersion": "v1"}, "data": {"k": "v"}})
    assert code == 500
    assert body["message"] == 'resourceVersion: Invalid value: "v1": strconv.ParseUint: parsing "v1": invalid syntax'


def test_an_update_with_resource_version_zero_is_unconditional(apiserver):
    assert _send(apiserver.url, "POST", _CMS, {"metadata": {"name": "u0"}})[0] == 201
    code, body = _send(apiserver.url, "PUT", f"{_CMS}/u0", {"metadata": {"name": "u0", "resourceVersion": "0"}, "data": {"k": "v"}})
    assert code == 200, body
    assert body["data"] == {"k": "v"}


def test_generate_name_is_ignored_when_a_name_is_given(apiserver):
    obj = {"metadata": {"name": "gen-fixed", "generateName": "gen-"}}  # a name that looks generated
    code, body = _send(apiserver.url, "POST", _CMS, obj)
    assert code == 201 and body["metadata"]["name"] == "gen-fixed"
    code, body = _send(apiserver.url, "POST", _CMS, obj)
    assert code == 409
    assert body["reason"] == "AlreadyExists" and body["details"]["name"] == "gen-fixed"


def test_generate_name_makes_a_name_when_none_is_given(apiserver):
    code, body = _send(apiserver.url, "POST", _CMS, {"metadata": {"generateName": "gen-"}})
    assert code == 201 and body["metadata"]["name"].startswith("gen-") and len(body["metadata"]["name"]) == 9
