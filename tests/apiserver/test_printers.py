"""Server-side printing: Table cells per kind, includeObject, durations, and real kubectl.

All unit tests use a fixed ``NOW`` so ages are exact. The last test serves a
Table from a tiny aiohttp app and checks what the real ``kubectl get pods``
prints from it.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import re
import shutil
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from aiohttp import web

from k8py.api.errors import BadRequest
from k8py.apiserver.printers import PRINTERS, build_table, table_columns, table_version
from k8py.apiserver.printers.durations import human_duration, short_human_duration, since

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc)


def ago(**kw: float) -> str:
    return (NOW - timedelta(**kw)).strftime("%Y-%m-%dT%H:%M:%SZ")


def meta(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "namespace": "default", "creationTimestamp": ago(days=2, hours=3), **extra}


def cells(group: str, kind: str, obj: dict[str, Any]) -> list[Any]:
    table = build_table(group, kind, [obj], list_meta={}, now=NOW)
    return table["rows"][0]["cells"]


def row(group: str, kind: str, obj: dict[str, Any]) -> dict[str, str]:
    """Cells keyed by column name (upper-cased, as kubectl shows them)."""
    names = [c["name"].upper() for c in table_columns(group, kind)]
    return dict(zip(names, cells(group, kind, obj)))


# -- durations ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "human", "short"),
    [
        (-5, "<invalid>", "<invalid>"),
        (-1, "0s", "0s"),
        (0, "0s", "0s"),
        (5, "5s", "5s"),
        (119, "119s", "1m"),
        (120, "2m", "2m"),
        (192, "3m12s", "3m"),
        (600, "10m", "10m"),
        (179 * 60, "179m", "2h"),
        (3 * 3600 + 5 * 60, "3h5m", "3h"),
        (8 * 3600, "8h", "8h"),
        (47 * 3600, "47h", "1d"),
        (2 * 86400 + 3 * 3600, "2d3h", "2d"),
        (7 * 86400, "7d", "7d"),
        (30 * 86400, "30d", "30d"),
        (3 * 365 * 86400 + 40 * 86400, "3y40d", "3y"),
        (9 * 365 * 86400, "9y", "9y"),
    ],
)
def test_durations_match_upstream_human_and_short_formats(seconds: int, human: str, short: str) -> None:
    assert human_duration(timedelta(seconds=seconds)) == human
    assert short_human_duration(timedelta(seconds=seconds)) == short


def test_missing_or_garbled_timestamp_prints_unknown() -> None:
    assert since(None, NOW) == "<unknown>"
    assert since("yesterday", NOW) == "<unknown>"
    assert since("2024-05-01T11:59:30.123456Z", NOW) == "29s"


# -- pods -----------------------------------------------------------------------


def pod(
    *,
    phase: str = "Running",
    containers: list[dict[str, Any]] | None = None,
    statuses: list[dict[str, Any]] | None = None,
    init: list[dict[str, Any]] | None = None,
    init_statuses: list[dict[str, Any]] | None = None,
    conditions: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    statuses = statuses if statuses is not None else [running("app")]
    containers = containers or [{"name": s["name"], "image": "nginx"} for s in statuses] or [
        {"name": "app"}
    ]
    status: dict[str, Any] = {"phase": phase, "containerStatuses": statuses}
    if init_statuses is not None:
        status["initContainerStatuses"] = init_statuses
    if conditions is not None:
        status["conditions"] = conditions
    status.update(extra.pop("status", {}))
    spec: dict[str, Any] = {"containers": containers, **extra.pop("spec", {})}
    if init is not None:
        spec["initContainers"] = init
    return {"metadata": meta("web", **extra.pop("metadata", {})), "spec": spec, "status": status}


def running(name: str, *, ready: bool = True, restarts: int = 0, **extra: Any) -> dict[str, Any]:
    return {"name": name, "ready": ready, "restartCount": restarts, "state": {"running": {}}, **extra}


def waiting(name: str, reason: str, *, restarts: int = 0, **extra: Any) -> dict[str, Any]:
    return {"name": name, "ready": False, "restartCount": restarts, "state": {"waiting": {"reason": reason}}, **extra}


def terminated(name: str, reason: str = "", exit_code: int = 0, **extra: Any) -> dict[str, Any]:
    term: dict[str, Any] = {"exitCode": exit_code}
    if reason:
        term["reason"] = reason
    term.update(extra.pop("term", {}))
    return {"name": name, "ready": False, "restartCount": 0, "state": {"terminated": term}, **extra}


def last_died(when: str) -> dict[str, Any]:
    return {"lastState": {"terminated": {"exitCode": 1, "finishedAt": when}}}


READY = [{"type": "Ready", "status": "True"}]
NOT_READY = [{"type": "Ready", "status": "False"}]
TWO_INITS = [{"name": "a"}, {"name": "b"}]


@pytest.mark.parametrize(
    ("obj", "ready", "status", "restarts"),
    [
        pytest.param(pod(statuses=[running("a"), running("b")]), "2/2", "Running", "0", id="running"),
        pytest.param(
            pod(phase="Pending", statuses=[waiting("app", "ContainerCreating")]),
            "0/1", "ContainerCreating", "0", id="creating",
        ),
        pytest.param(
            pod(phase="Pending", statuses=[waiting("app", "PodInitializing")], init=TWO_INITS,
                init_statuses=[running("a", ready=False), waiting("b", "PodInitializing")]),
            "0/1", "Init:0/2", "0", id="init-0-of-2",
        ),
        pytest.param(
            pod(phase="Pending", statuses=[waiting("app", "PodInitializing")], init=TWO_INITS,
                init_statuses=[terminated("a", "Completed"), running("b", ready=False)]),
            "0/1", "Init:1/2", "0", id="init-1-of-2",
        ),
        pytest.param(
            pod(phase="Pending", statuses=[waiting("app", "PodInitializing")], init=TWO_INITS,
                init_statuses=[terminated("a", "Error", 1), waiting("b", "PodInitializing")]),
            "0/1", "Init:Error", "0", id="init-error",
        ),
        pytest.param(
            pod(phase="Pending", statuses=[waiting("app", "PodInitializing")], init=TWO_INITS,
                init_statuses=[waiting("a", "CrashLoopBackOff", restarts=4, **last_died(ago(seconds=30))),
                               waiting("b", "PodInitializing")]),
            "0/1", "Init:CrashLoopBackOff", "4 (30s ago)", id="init-crashloop",
        ),
        pytest.param(
            pod(phase="Pending", statuses=[waiting("app", "PodInitializing")], init=TWO_INITS,
                init_statuses=[terminated("a", exit_code=3)]),
            "0/1", "Init:ExitCode:3", "0", id="init-exit-code",
        ),
        pytest.param(
            pod(phase="Pending", statuses=[waiting("app", "PodInitializing")], init=TWO_INITS,
                init_statuses=[terminated("a", exit_code=137, term={"signal": 9})]),
            "0/1", "Init:Signal:9", "0", id="init-signal",
        ),
        pytest.param(
            pod(phase="Pending", statuses=[waiting("app", "PodInitializing")], init=TWO_INITS,
                init_statuses=[terminated("a", "Completed"), terminated("b", "Completed")]),
            "0/1", "PodInitializing", "0", id="pod-initializing",
        ),
        pytest.param(
            pod(statuses=[waiting("app", "CrashLoopBackOff", restarts=5, **last_died(ago(minutes=5)))]),
            "0/1", "CrashLoopBackOff", "5 (5m ago)", id="crashloop",
        ),
        pytest.param(
            pod(phase="Succeeded", statuses=[terminated("app", "Completed")]),
            "0/1", "Completed", "0", id="completed",
        ),
        pytest.param(
            pod(phase="Failed", statuses=[terminated("app", "Error", 1)]), "0/1", "Error", "0", id="error",
        ),
        pytest.param(
            pod(phase="Failed", statuses=[terminated("app", exit_code=2)]), "0/1", "ExitCode:2", "0", id="exit-code",
        ),
        pytest.param(
            pod(metadata={"deletionTimestamp": ago(seconds=3)}), "1/1", "Terminating", "0", id="terminating",
        ),
        pytest.param(
            pod(phase="Succeeded", statuses=[terminated("app", "Completed")],
                metadata={"deletionTimestamp": ago(seconds=3)}),
            "0/1", "Completed", "0", id="terminal-pod-being-deleted-keeps-status",
        ),
        pytest.param(
            pod(metadata={"deletionTimestamp": ago(seconds=3)}, status={"reason": "NodeLost"}),
            "1/1", "Unknown", "0", id="node-lost",
        ),
        pytest.param(
            pod(statuses=[terminated("job", "Completed"), running("side")], conditions=NOT_READY),
            "1/2", "NotReady", "0", id="not-ready",
        ),
        pytest.param(
            pod(statuses=[terminated("job", "Completed"), running("side")], conditions=READY),
            "1/2", "Running", "0", id="completed-with-running-and-ready",
        ),
        pytest.param(
            pod(phase="Pending", statuses=[waiting("a", "ErrImagePull"), waiting("b", "ContainerCreating")]),
            "0/2", "ErrImagePull", "0", id="first-container-reason-wins",
        ),
        pytest.param(
            pod(statuses=[running("app", restarts=1, **last_died(ago(hours=3)))],
                init=[{"name": "proxy", "restartPolicy": "Always"}],
                init_statuses=[running("proxy", started=True, restarts=2, **last_died(ago(minutes=20)))],
                conditions=[{"type": "Initialized", "status": "True"}, *READY]),
            "2/2", "Running", "3 (20m ago)", id="sidecar-counts-towards-ready-and-restarts",
        ),
        pytest.param(
            pod(phase="Pending", statuses=[],
                conditions=[{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]),
            "0/1", "SchedulingGated", "0", id="scheduling-gated",
        ),
        pytest.param(
            pod(phase="Failed", statuses=[], status={"reason": "Evicted"}), "0/1", "Evicted", "0", id="evicted",
        ),
        pytest.param(pod(statuses=[running("app", restarts=2)]), "1/1", "Running", "2", id="restarts-without-date"),
    ],
)
def test_pod_ready_status_and_restarts_match_kubectl(obj: dict, ready: str, status: str, restarts: str) -> None:
    got = row("", "Pod", obj)
    assert (got["READY"], got["STATUS"], got["RESTARTS"]) == (ready, status, restarts)
    assert got["AGE"] == "2d3h"


def test_pod_wide_columns_show_ip_node_and_readiness_gates() -> None:
    obj = pod(
        spec={"nodeName": "n1", "readinessGates": [{"conditionType": "x/a"}, {"conditionType": "x/b"}]},
        status={"podIP": "10.1.0.7", "podIPs": [{"ip": "10.1.0.7"}, {"ip": "fd00::7"}]},
        conditions=[{"type": "x/a", "status": "True"}, {"type": "x/b", "status": "False"}],
    )
    assert cells("", "Pod", obj)[5:] == ["10.1.0.7", "n1", "<none>", "1/2"]
    assert cells("", "Pod", pod())[5:] == ["<none>", "<none>", "<none>", "<none>"]
    assert [c["priority"] for c in table_columns("", "Pod")] == [0, 0, 0, 0, 0, 1, 1, 1, 1]


def test_finished_pods_carry_completed_row_condition() -> None:
    table = build_table("", "Pod", [pod(phase="Succeeded", statuses=[terminated("a", "Completed")]), pod()],
                        list_meta={}, now=NOW)
    assert table["rows"][0]["conditions"] == [
        {"type": "Completed", "status": "True", "reason": "Succeeded", "message": "The pod has completed successfully."}
    ]
    assert "conditions" not in table["rows"][1]


# -- nodes, services, endpoints -------------------------------------------------


def node(*, ready: str | None = "True", unschedulable: bool = False, labels: dict | None = None) -> dict:
    conditions = [{"type": "MemoryPressure", "status": "False"}]
    if ready is not None:
        conditions.append({"type": "Ready", "status": ready})
    return {
        "metadata": {"name": "n1", "creationTimestamp": ago(days=10), "labels": labels or {}},
        "spec": {"unschedulable": unschedulable},
        "status": {
            "conditions": conditions,
            "addresses": [{"type": "Hostname", "address": "n1"}, {"type": "InternalIP", "address": "10.0.0.5"}],
            "nodeInfo": {"kubeletVersion": "v1.32.0", "osImage": "Debian GNU/Linux 12", "kernelVersion": "6.1.0",
                         "containerRuntimeVersion": "k8py://0.1.0"},
        },
    }


@pytest.mark.parametrize(
    ("obj", "status"),
    [
        (node(), "Ready"),
        (node(ready="False"), "NotReady"),
        (node(ready="Unknown"), "NotReady"),
        (node(ready=None), "Unknown"),
        (node(unschedulable=True), "Ready,SchedulingDisabled"),
    ],
)
def test_node_status_column(obj: dict, status: str) -> None:
    assert row("", "Node", obj)["STATUS"] == status


def test_node_roles_come_from_role_labels_sorted() -> None:
    labels = {"node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/control-plane": "",
              "node-role.kubernetes.io/": "", "kubernetes.io/role": "infra", "app": "x"}
    assert row("", "Node", node(labels=labels))["ROLES"] == "control-plane,infra,worker"
    assert cells("", "Node", node()) == [
        "n1", "Ready", "<none>", "10d", "v1.32.0", "10.0.0.5", "<none>", "Debian GNU/Linux 12", "6.1.0", "k8py://0.1.0",
    ]


def service(type_: str | None, ports: list[dict], **spec: Any) -> dict:
    s: dict[str, Any] = {"ports": ports, "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"], **spec}
    if type_:
        s["type"] = type_
    return {"metadata": meta("web"), "spec": s, "status": spec.pop("status", {})}


def test_service_ports_types_and_external_ips() -> None:
    http = {"port": 80, "protocol": "TCP", "targetPort": 8080}
    assert cells("", "Service", service("ClusterIP", [http, {"port": 53, "protocol": "UDP"}],
                                        selector={"tier": "fe", "app": "web"})) == [
        "web", "ClusterIP", "10.96.0.10", "<none>", "80/TCP,53/UDP", "2d3h", "app=web,tier=fe",
    ]
    assert row("", "Service", service("NodePort", [{**http, "nodePort": 30080}]))["PORT(S)"] == "80:30080/TCP"
    lb = service("LoadBalancer", [http])
    assert row("", "Service", lb)["EXTERNAL-IP"] == "<pending>"
    lb["status"] = {"loadBalancer": {"ingress": [{"ip": "203.0.113.9"}, {"hostname": "lb.example.com"}]}}
    assert row("", "Service", lb)["EXTERNAL-IP"] == "203.0.113.9,lb.example.com"
    ext = service("ExternalName", [], externalName="db.example.com", clusterIPs=[], clusterIP="")
    assert cells("", "Service", ext)[2:5] == ["<none>", "db.example.com", "<none>"]
    headless = service(None, [http], clusterIP="None", clusterIPs=["None"], externalIPs=["1.2.3.4"])
    assert cells("", "Service", headless)[1:4] == ["ClusterIP", "None", "1.2.3.4"]
    assert row("", "Service", service("ClusterIP", [http]))["SELECTOR"] == "<none>"


def test_endpoints_show_three_addresses_then_more() -> None:
    subsets = [{"addresses": [{"ip": f"10.0.0.{i}"} for i in range(1, 5)], "ports": [{"port": 80}, {"port": 443}]}]
    ep = {"metadata": meta("web"), "subsets": subsets}
    assert row("", "Endpoints", ep)["ENDPOINTS"] == "10.0.0.1:80,10.0.0.2:80,10.0.0.3:80 + 5 more..."
    v6 = {"metadata": meta("web"), "subsets": [{"addresses": [{"ip": "fd00::1"}], "ports": [{"port": 80}]}]}
    assert row("", "Endpoints", v6)["ENDPOINTS"] == "[fd00::1]:80"
    portless = {"metadata": meta("web"), "subsets": [{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}]}]}
    assert row("", "Endpoints", portless)["ENDPOINTS"] == "10.0.0.1,10.0.0.2"
    assert row("", "Endpoints", {"metadata": meta("web")})["ENDPOINTS"] == "<none>"


# -- apps and batch ---------------------------------------------------------------


def workload(spec: dict, status: dict) -> dict:
    containers = [{"name": "web", "image": "nginx:1.27"}, {"name": "log", "image": "busybox"}]
    template = {"spec": {"containers": containers}}
    return {"metadata": meta("web"), "spec": {"template": template, **spec}, "status": status}


def test_apps_workloads_print_upstream_columns() -> None:
    selector = {"matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}]}
    dep = workload({"replicas": 3, "selector": selector},
                   {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2})
    assert cells("apps", "Deployment", dep) == [
        "web", "2/3", 3, 2, "2d3h", "web,log", "nginx:1.27,busybox", "app=web,tier in (a,b)",
    ]
    rs = workload({"replicas": 3, "selector": {"matchLabels": {"app": "web"}}},
                  {"replicas": 3, "readyReplicas": 1})
    assert cells("apps", "ReplicaSet", rs)[:5] == ["web", 3, 3, 1, "2d3h"]
    assert cells("apps", "ReplicaSet", workload({}, {}))[-1] == "<none>"
    ds = workload({"selector": {"matchLabels": {"app": "web"}}}, {
        "desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 2,
        "updatedNumberScheduled": 3, "numberAvailable": 2})
    ds["spec"]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/os": "linux"}
    assert cells("apps", "DaemonSet", ds)[:8] == ["web", 3, 3, 2, 3, 2, "kubernetes.io/os=linux", "2d3h"]
    sts = workload({"replicas": 3}, {"readyReplicas": 3})
    assert cells("apps", "StatefulSet", sts) == ["web", "3/3", "2d3h", "web,log", "nginx:1.27,busybox"]
    assert [c["name"] for c in table_columns("apps", "Deployment")][:5] == [
        "Name", "Ready", "Up-to-date", "Available", "Age"]


def job(spec: dict, status: dict, **metadata: Any) -> dict:
    template = {"spec": {"containers": [{"name": "pi", "image": "perl"}]}}
    return {"metadata": meta("pi", **metadata), "spec": {"template": template, **spec}, "status": status}


def test_jobs_show_status_completions_and_duration() -> None:
    done = job({"completions": 1}, {"succeeded": 1, "startTime": ago(minutes=10),
                                    "completionTime": ago(minutes=7, seconds=30),
                                    "conditions": [{"type": "Complete", "status": "True"}]})
    assert cells("batch", "Job", done)[:5] == ["pi", "Complete", "1/1", "2m30s", "2d3h"]
    active = job({"parallelism": 3}, {"startTime": ago(seconds=40)})
    assert cells("batch", "Job", active)[1:4] == ["Running", "0/1 of 3", "40s"]
    assert cells("batch", "Job", job({"completions": 5}, {"succeeded": 2}))[1:4] == ["Running", "2/5", ""]
    failed = job({}, {"conditions": [{"type": "FailureTarget", "status": "True"},
                                     {"type": "Failed", "status": "True"}]})
    assert row("batch", "Job", failed)["STATUS"] == "Failed"
    suspended = job({}, {"conditions": [{"type": "Suspended", "status": "True"}]})
    assert row("batch", "Job", suspended)["STATUS"] == "Suspended"
    assert row("batch", "Job", job({}, {}, deletionTimestamp=ago(seconds=1)))["STATUS"] == "Terminating"


def test_cronjobs_show_schedule_timezone_suspend_and_last_schedule() -> None:
    cron = {"metadata": meta("nightly"),
            "spec": {"schedule": "0 3 * * *", "suspend": False, "jobTemplate": {"spec": {}}},
            "status": {"active": [{"name": "nightly-1"}], "lastScheduleTime": ago(minutes=5)}}
    assert cells("batch", "CronJob", cron)[:7] == ["nightly", "0 3 * * *", "<none>", "False", 1, "5m", "2d3h"]
    cron["spec"] = {"schedule": "@hourly", "timeZone": "Europe/Paris"}
    cron["status"] = {}
    assert cells("batch", "CronJob", cron)[1:6] == ["@hourly", "Europe/Paris", "<unset>", 0, "<none>"]


# -- small kinds ----------------------------------------------------------------------


def test_small_kinds_print_counts_and_holders() -> None:
    namespace = {"metadata": meta("dev"), "status": {"phase": "Terminating"}}
    assert cells("", "Namespace", namespace) == ["dev", "Terminating", "2d3h"]
    cm = {"metadata": meta("cfg"), "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}}
    assert cells("", "ConfigMap", cm) == ["cfg", 3, "2d3h"]
    secret = {"metadata": meta("tls"), "type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}}
    assert cells("", "Secret", secret) == ["tls", "kubernetes.io/tls", 2, "2d3h"]
    assert cells("", "ServiceAccount", {"metadata": meta("default")}) == ["default", 0, "2d3h"]
    lease = {"metadata": meta("kube-scheduler"), "spec": {"holderIdentity": "node-1_abc"}}
    assert cells("coordination.k8s.io", "Lease", lease) == ["kube-scheduler", "node-1_abc", "2d3h"]
    assert cells("coordination.k8s.io", "Lease", {"metadata": meta("free"), "spec": {}})[1] == ""


def test_endpoint_slices_list_ports_and_addresses() -> None:
    eps = {"metadata": meta("web-abc"), "addressType": "IPv4",
           "ports": [{"port": 80}, {"name": "metrics"}, {}],
           "endpoints": [{"addresses": ["10.0.0.1", "10.0.0.2"]}, {"addresses": ["10.0.0.3"]},
                         {"addresses": ["10.0.0.4"]}]}
    assert cells("discovery.k8s.io", "EndpointSlice", eps) == [
        "web-abc", "IPv4", "80,metrics,*", "10.0.0.1,10.0.0.2,10.0.0.3 + 1 more...", "2d3h",
    ]
    empty = {"metadata": meta("none"), "addressType": "IPv6"}
    assert cells("discovery.k8s.io", "EndpointSlice", empty)[2:4] == ["<unset>", "<unset>"]


def test_events_print_last_seen_object_and_count() -> None:
    ev = {"metadata": meta("web.17a"), "type": "Warning", "reason": "BackOff", "message": " Back-off restarting \n",
          "involvedObject": {"kind": "Pod", "name": "web", "fieldPath": "spec.containers{app}"},
          "source": {"component": "kubelet", "host": "n1"},
          "firstTimestamp": ago(minutes=30), "lastTimestamp": ago(seconds=45), "count": 7}
    assert cells("", "Event", ev) == [
        "45s", "Warning", "BackOff", "pod/web", "spec.containers{app}", "kubelet, n1", "Back-off restarting",
        "30m", 7, "web.17a",
    ]
    assert [c["name"] for c in table_columns("", "Event") if c["priority"] == 0] == [
        "Last Seen", "Type", "Reason", "Object", "Message"]
    singleton = {"metadata": meta("x"), "eventTime": "2024-05-01T11:58:00.000000Z", "reportingComponent": "scheduler",
                 "involvedObject": {"kind": "Node"}, "type": "Normal", "reason": "Scheduled"}
    got = row("", "Event", singleton)
    assert (got["LAST SEEN"], got["OBJECT"], got["SOURCE"], got["COUNT"]) == ("2m", "node", "scheduler", 1)
    series = {"metadata": meta("y"), "regarding": {"kind": "Pod", "name": "web"}, "note": "Pulling",
              "eventTime": ago(minutes=20), "series": {"count": 4, "lastObservedTime": ago(seconds=10)},
              "reportingController": "kubelet", "reportingInstance": "n2", "type": "Normal", "reason": "Pulling"}
    assert cells("events.k8s.io", "Event", series) == [
        "10s", "Normal", "Pulling", "pod/web", "", "kubelet, n2", "Pulling", "20m", 4, "y"]


# -- table envelope -----------------------------------------------------------------


def test_kinds_without_printer_get_name_and_created_at() -> None:
    obj = {"apiVersion": "example.com/v1", "kind": "Widget",
           "metadata": {"name": "w1", "creationTimestamp": "2024-04-30T10:00:00+02:00"}}
    table = build_table("example.com", "Widget", [obj], list_meta={"resourceVersion": "12"}, now=NOW)
    assert [(c["name"], c["type"], c["format"]) for c in table["columnDefinitions"]] == [
        ("Name", "string", "name"), ("Created At", "date", "")]
    assert table["rows"][0]["cells"] == ["w1", "2024-04-30T08:00:00Z"]
    assert cells("example.com", "Widget", {"metadata": {"name": "w2"}}) == ["w2", "0001-01-01T00:00:00Z"]


def test_include_object_variants() -> None:
    obj = pod()
    obj["metadata"]["resourceVersion"] = "41"
    by_default = build_table("", "Pod", [obj], list_meta={"resourceVersion": "42"}, now=NOW)
    assert by_default["rows"][0]["object"] == {
        "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}
    assert build_table("", "Pod", [obj], list_meta={}, include_object="", now=NOW)["rows"][0]["object"]["kind"] == (
        "PartialObjectMetadata")
    assert build_table("", "Pod", [obj], list_meta={}, include_object="Object", now=NOW)["rows"][0]["object"] is obj
    assert build_table("", "Pod", [obj], list_meta={}, include_object="None", now=NOW)["rows"][0]["object"] is None
    beta = build_table("", "Pod", [obj], list_meta={}, version="v1beta1", now=NOW)
    assert beta["apiVersion"] == beta["rows"][0]["object"]["apiVersion"] == "meta.k8s.io/v1beta1"
    with pytest.raises(BadRequest, match='unrecognized includeObject value: "Everything"'):
        build_table("", "Pod", [obj], list_meta={}, include_object="Everything")


def test_table_metadata_comes_from_the_list_or_the_single_object() -> None:
    obj = pod()
    obj["metadata"]["resourceVersion"] = "41"
    list_meta = {"resourceVersion": "42", "continue": "tok", "remainingItemCount": 3, "selfLink": ""}
    listed = build_table("", "Pod", [obj], list_meta=list_meta)
    assert (listed["kind"], listed["metadata"]) == (
        "Table", {"resourceVersion": "42", "continue": "tok", "remainingItemCount": 3})
    assert build_table("", "Pod", [], list_meta={"resourceVersion": "42"})["rows"] == []
    single = build_table("", "Pod", [obj], list_meta=None, include_columns=False)
    assert single["metadata"] == {"resourceVersion": "41"}
    assert single["columnDefinitions"] is None


@pytest.mark.parametrize("key", sorted(PRINTERS, key=str), ids=lambda k: f"{k[0] or 'core'}/{k[1]}")
def test_every_printer_fills_every_column_even_for_an_empty_object(key: tuple[str, str]) -> None:
    group, kind = key
    columns = table_columns(group, kind)
    assert columns[0]["name"] in ("Name", "Last Seen")
    assert all(c["description"] for c in columns), [c["name"] for c in columns if not c["description"]]
    assert len(cells(group, kind, {})) == len(columns)


@pytest.mark.parametrize(
    ("accept", "version"),
    [
        ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
         "application/json", "v1"),
        ("application/json;as=Table;v=v1beta1;g=meta.k8s.io", "v1beta1"),
        ("application/json;g=meta.k8s.io;v=v1;as=Table", "v1"),
        ("application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io, application/json", None),
        ("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io, "
         "application/json;as=Table;v=v1;g=meta.k8s.io", "v1"),
        ("application/json, application/json;as=Table;v=v1;g=meta.k8s.io", None),
        ("application/json;as=Table;v=v2;g=meta.k8s.io", None),
        ("application/json, */*", None),
        ("", None),
        (None, None),
    ],
)
def test_table_is_negotiated_from_the_first_servable_accept_clause(accept: str | None, version: str | None) -> None:
    assert table_version(accept) == version


# -- end to end with the real kubectl ----------------------------------------------------

KUBECTL = shutil.which("kubectl")


def _discovery_app(pods: list[dict[str, Any]], watch_events: list[dict[str, Any]]) -> web.Application:
    async def version(_: web.Request) -> web.Response:
        return web.json_response({"major": "1", "minor": "32", "gitVersion": "v1.32.0", "gitCommit": "0" * 40,
                                  "gitTreeState": "clean", "buildDate": "2024-12-11T00:00:00Z",
                                  "goVersion": "go1.23.3", "compiler": "gc", "platform": "linux/amd64"})

    async def api(request: web.Request) -> web.Response:
        return web.json_response({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": request.host}]})

    async def api_v1(_: web.Request) -> web.Response:
        return web.json_response({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "v1", "resources": [
            {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod", "shortNames": ["po"],
             "categories": ["all"], "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]}]})

    async def apis(_: web.Request) -> web.Response:
        return web.json_response({"kind": "APIGroupList", "apiVersion": "v1", "groups": []})

    async def list_pods(request: web.Request) -> web.StreamResponse:
        version = table_version(request.headers.get("Accept"))
        if request.query.get("watch") == "true":
            assert version == "v1", request.headers.get("Accept")
            stream = web.StreamResponse(headers={"Content-Type": "application/json"})
            await stream.prepare(request)
            for i, obj in enumerate(watch_events):
                table = build_table("", "Pod", [obj], list_meta=None, include_columns=i == 0)
                await stream.write(json.dumps({"type": "MODIFIED", "object": table}).encode() + b"\n")
            await stream.write_eof()  # kubectl get -w exits 0 when the stream ends
            return stream
        if version:
            return web.json_response(build_table("", "Pod", pods, list_meta={"resourceVersion": "7"}, version=version))
        return web.json_response(
            {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "7"}, "items": pods})

    app = web.Application()
    app.router.add_get("/version", version)
    app.router.add_get("/api", api)
    app.router.add_get("/api/v1", api_v1)
    app.router.add_get("/apis", apis)
    app.router.add_get("/api/v1/namespaces/default/pods", list_pods)
    app.router.add_get("/api/v1/pods", list_pods)
    return app


async def _kubectl(home: str, *args: str) -> str:
    env = {**os.environ, "HOME": home, "KUBECONFIG": os.path.join(home, ".kube", "config")}
    proc = await asyncio.create_subprocess_exec(
        KUBECTL or "kubectl", *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, err.decode()
    return out.decode()


def _columns_of(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


@pytest.mark.kubectl
@pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed")
async def test_real_kubectl_prints_server_side_pod_columns(tmp_path) -> None:
    now = datetime.now(timezone.utc)
    long_ago = (now - timedelta(days=10)).strftime("%Y-%m-%dT%H:%M:%SZ")
    web_pod = {
        "metadata": {"name": "web-1", "namespace": "default", "creationTimestamp": long_ago, "resourceVersion": "5"},
        "spec": {"nodeName": "node-a", "containers": [{"name": "app"}, {"name": "side"}]},
        "status": {"phase": "Running", "podIP": "10.244.0.9", "podIPs": [{"ip": "10.244.0.9"}],
                   "containerStatuses": [
                       {"name": "app", "ready": True, "restartCount": 2, "state": {"running": {}},
                        "lastState": {"terminated": {"exitCode": 1, "finishedAt": long_ago}}},
                       {"name": "side", "ready": False, "restartCount": 0,
                        "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]},
    }
    deleting = copy.deepcopy(web_pod)
    deleting["metadata"]["deletionTimestamp"] = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    recovered = copy.deepcopy(web_pod)
    recovered["status"]["containerStatuses"][1] = {
        "name": "side", "ready": True, "restartCount": 0, "state": {"running": {}}}
    runner = web.AppRunner(_discovery_app([web_pod], [recovered, deleting]))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = runner.addresses[0][1]
        (tmp_path / ".kube").mkdir()
        (tmp_path / ".kube" / "config").write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
            f"clusters:\n- name: t\n  cluster:\n    server: http://127.0.0.1:{port}\n"
            "contexts:\n- name: t\n  context:\n    cluster: t\n    user: t\n    namespace: default\n"
            "users:\n- name: t\n  user: {}\n")
        plain = (await _kubectl(str(tmp_path), "get", "pods")).splitlines()
        assert _columns_of(plain[0]) == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
        assert _columns_of(plain[1]) == ["web-1", "1/2", "CrashLoopBackOff", "2 (10d ago)", "10d"]
        wide = (await _kubectl(str(tmp_path), "get", "pods", "-o", "wide")).splitlines()
        assert _columns_of(wide[0]) == [
            "NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE", "READINESS GATES"]
        assert _columns_of(wide[1]) == [
            "web-1", "1/2", "CrashLoopBackOff", "2 (10d ago)", "10d", "10.244.0.9", "node-a", "<none>", "<none>"]
        # -A takes NAMESPACE from each row's PartialObjectMetadata.
        everywhere = (await _kubectl(str(tmp_path), "get", "pods", "-A")).splitlines()
        assert _columns_of(everywhere[0])[:3] == ["NAMESPACE", "NAME", "READY"]
        assert _columns_of(everywhere[1])[:3] == ["default", "web-1", "1/2"]
        # Watch events are one-row Tables; only the first carries columnDefinitions.
        watched = (await _kubectl(str(tmp_path), "get", "pods", "-w")).splitlines()
        assert [_columns_of(line)[:3] for line in watched] == [
            ["NAME", "READY", "STATUS"],
            ["web-1", "1/2", "CrashLoopBackOff"],
            ["web-1", "2/2", "Running"],
            ["web-1", "1/2", "Terminating"],
        ]
    finally:
        await runner.cleanup()
