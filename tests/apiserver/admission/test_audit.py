"""Audit logging: upstream's audit.k8s.io/v1 Events as JSON lines, chosen by
a Policy (levels, stages, omitStages), with admission's annotations, and
rotated by size; driven over HTTP against a real API server."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest

from k8py.apiserver.audit.log_backend import LogBackend
from k8py.apiserver.audit.policy import RequestFacts, parse_policy
from tests.support.servers import ServerThread, sqlite_storage

POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  nonResourceURLs: ["/healthz*", "/readyz*", "/version"]
- level: RequestResponse
  resources: [{group: "", resources: [configmaps]}]
- level: Request
  resources: [{group: "", resources: [secrets]}]
  omitStages: [ResponseComplete, RequestReceived]
- level: Metadata
  resources: [{group: "", resources: [pods, pods/status]}]
  omitStages: []
- level: Metadata
"""


def events(path) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.fixture
def audited(tmp_path):
    (tmp_path / "policy.yaml").write_text(POLICY)
    log = tmp_path / "audit" / "audit.log"
    with ServerThread(sqlite_storage(str(tmp_path / "data")), audit_policy_file=str(tmp_path / "policy.yaml"),
                      audit_log_path=str(log)) as s:
        yield s, log


def test_a_create_is_audited_with_request_and_response_as_upstream(audited):
    server, log = audited
    r = httpx.post(f"{server.url}/api/v1/namespaces/default/configmaps?fieldManager=me",
                   json={"metadata": {"name": "cm"}, "data": {"k": "v"}}, headers={"User-Agent": "tester/1.0"}, timeout=30)
    assert r.status_code == 201
    (event,) = [e for e in events(log) if (e.get("objectRef") or {}).get("name") == "cm"]
    assert r.headers["Audit-Id"] == event["auditID"]
    assert event["kind"] == "Event" and event["apiVersion"] == "audit.k8s.io/v1"
    assert (event["level"], event["stage"], event["verb"]) == ("RequestResponse", "ResponseComplete", "create")
    assert event["requestURI"] == "/api/v1/namespaces/default/configmaps?fieldManager=me"
    assert event["user"] == {"username": "system:unsecured", "groups": ["system:masters", "system:authenticated"]}
    assert event["objectRef"] == {"resource": "configmaps", "namespace": "default", "name": "cm", "apiVersion": "v1"}
    assert event["responseStatus"] == {"metadata": {}, "code": 201}
    assert event["userAgent"] == "tester/1.0" and event["sourceIPs"] == ["127.0.0.1"]
    assert event["requestObject"] == {"metadata": {"name": "cm"}, "data": {"k": "v"}}
    assert event["responseObject"]["metadata"]["uid"] == r.json()["metadata"]["uid"]
    assert event["requestReceivedTimestamp"].endswith("Z") and len(event["stageTimestamp"]) == len("2026-12-01T12:00:00.000000Z")


def test_levels_stages_and_failures_follow_the_policy(audited):
    server, log = audited
    with httpx.Client(base_url=server.url, timeout=30) as http:
        http.get("/healthz")
        http.post("/api/v1/namespaces/default/secrets", json={"metadata": {"name": "s"}, "data": {}})
        http.get("/api/v1/namespaces/default/pods/missing")
        http.post("/api/v1/namespaces/default/pods", json={"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}})
        http.get("/api/v1/namespaces")
    got = events(log)
    assert not [e for e in got if e["requestURI"].startswith("/healthz")]
    secret = [e for e in got if (e.get("objectRef") or {}).get("resource") == "secrets"]
    assert secret == []  # its only stage left, ResponseComplete, is omitted
    missing = [e for e in got if (e.get("objectRef") or {}).get("name") == "missing"]
    assert [e["stage"] for e in missing] == ["ResponseComplete"]  # the policy's omitStages apply to every rule
    assert missing[0]["level"] == "Metadata" and "requestObject" not in missing[0]
    assert missing[0]["responseStatus"] == {"metadata": {}, "status": "Failure", "message": 'pods "missing" not found',
                                            "reason": "NotFound", "code": 404}
    (listed,) = [e for e in got if e["requestURI"] == "/api/v1/namespaces"]
    assert (listed["verb"], listed["objectRef"], listed["level"]) == ("list", {"resource": "namespaces", "apiVersion": "v1"}, "Metadata")


def test_pod_security_annotations_reach_the_audit_event(audited):
    server, log = audited
    with httpx.Client(base_url=server.url, timeout=30) as http:
        http.post("/api/v1/namespaces", json={"metadata": {"name": "psa", "labels": {
            "pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/audit": "restricted"}}})
        r = http.post("/api/v1/namespaces/psa/pods", json={"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}})
        assert r.status_code == 201
    (event,) = [e for e in events(log) if (e.get("objectRef") or {}).get("namespace") == "psa" and e["stage"] == "ResponseComplete"
                and e["verb"] == "create"]
    assert event["annotations"]["pod-security.kubernetes.io/enforce-policy"] == "baseline:latest"
    assert event["annotations"]["pod-security.kubernetes.io/audit-violations"].startswith(
        'would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false')


def test_a_watch_has_a_response_started_stage(audited):
    server, log = audited
    with httpx.Client(base_url=server.url, timeout=30) as http:
        with http.stream("GET", "/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=1") as r:
            for _ in r.iter_bytes():
                pass
    stages = [e["stage"] for e in events(log) if e["verb"] == "watch"]
    assert stages == ["ResponseStarted", "ResponseComplete"]


def test_the_log_rotates_by_size_and_keeps_maxbackup_files(tmp_path):
    backend = LogBackend(str(tmp_path / "audit.log"), max_bytes=100, max_backups=2)
    times = iter(range(1_700_000_000, 1_700_000_100))
    backend.clock = lambda: float(next(times))
    for i in range(10):
        backend.write(json.dumps({"n": i, "pad": "x" * 40}).encode() + b"\n")
    backend.close()
    files = sorted(os.listdir(tmp_path))
    assert "audit.log" in files and len(files) == 3
    assert all(f == "audit.log" or f.startswith("audit-2023-11-14T22-") and f.endswith(".log") for f in files)
    assert [json.loads(l)["n"] for l in open(tmp_path / "audit.log")] == [9]  # one 60-byte line per 100-byte file
    kept = sorted(f for f in files if f != "audit.log")
    assert [json.loads(open(tmp_path / f).read())["n"] for f in kept] == [7, 8]


def test_policy_rules_match_as_upstream():
    policy = parse_policy({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [
        {"level": "None", "users": ["system:kube-proxy"], "verbs": ["watch"]},
        {"level": "Request", "resources": [{"group": "apps", "resources": ["*/scale"]}]},
        {"level": "RequestResponse", "userGroups": ["admins"], "namespaces": ["prod"]},
        {"level": "Metadata", "omitStages": ["RequestReceived"]}]})
    f = lambda **kw: RequestFacts(**{"user": "u", "groups": (), "verb": "get", "resource_request": True, **kw})  # noqa: E731
    assert policy.level_for(f(user="system:kube-proxy", verb="watch"))[0] == "None"
    assert policy.level_for(f(api_group="apps", resource="deployments", subresource="scale"))[0] == "Request"
    assert policy.level_for(f(groups=("admins",), namespace="prod"))[0] == "RequestResponse"
    level, omit, _ = policy.level_for(f(groups=("admins",), namespace="dev"))
    assert level == "Metadata" and omit == {"RequestReceived"}


def test_a_bad_policy_stops_the_server_with_what_to_fix(tmp_path):
    (tmp_path / "p.yaml").write_text("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Everything\n")
    result = subprocess.run([sys.executable, "-m", "k8py", "apiserver", "--data-dir", str(tmp_path / "d"), "--port", "0",
                             "--audit-policy-file", str(tmp_path / "p.yaml"), "--audit-log-path", str(tmp_path / "a.log")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "rules[0].level must be one of None, Metadata, Request, RequestResponse" in result.stderr


def test_a_request_that_fails_authentication_is_audited_as_upstream(tmp_path):
    """401s are audited outside authentication: one ResponseStarted event, no user, what was tried."""
    (tmp_path / "policy.yaml").write_text(POLICY)
    log = tmp_path / "audit.log"
    with ServerThread(sqlite_storage(str(tmp_path / "data")), secure_port=0, insecure_port=None, anonymous_auth=False,
                      audit_policy_file=str(tmp_path / "policy.yaml"), audit_log_path=str(log)) as server:
        with httpx.Client(base_url=server.url, verify=False, timeout=30) as http:
            r = http.get("/api/v1/namespaces/default/pods", headers={"Authorization": "Bearer not-a-token", "Audit-Id": "bad-token"})
            assert r.status_code == 401
            r = http.get("/api/v1/namespaces/default/configmaps/x", headers={"Audit-Id": "no-credentials"})
            assert r.status_code == 401
    got = {e["auditID"]: e for e in events(log)}
    bad = got["bad-token"]
    assert (bad["stage"], bad["level"], bad["verb"]) == ("ResponseStarted", "Metadata", "list")
    assert bad["user"] == {}
    assert bad["responseStatus"] == {"metadata": {}, "message": "Authentication failed, attempted: bearer", "code": 401}
    assert bad["objectRef"] == {"resource": "pods", "namespace": "default", "apiVersion": "v1"}
    none = got["no-credentials"]
    assert none["level"] == "RequestResponse"  # the policy still picks the level by resource
    assert none["responseStatus"]["message"] == "Authentication failed, no credentials provided"
    assert [e["stage"] for e in events(log) if e["auditID"] in ("bad-token", "no-credentials")] == ["ResponseStarted"] * 2
