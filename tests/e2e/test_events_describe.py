"""Events about an object, and ``kubectl describe`` showing them.

kubectl describe reads core/v1 Events with an ``involvedObject`` field
selector (name, namespace, uid); an Event written through events.k8s.io/v1 is
the same object seen through the other version, so it shows up too.
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta, timezone

import kubernetes
import pytest

from tests.e2e.conftest import NS, pod


@pytest.fixture
def core(k8s) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(k8s)


def ago(seconds: float, *, micro: bool = False) -> str:
    moment = datetime.now(timezone.utc) - timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")


class Ages:
    """kubectl prints ages against its own clock, however late it runs: an
    age written as ``ago(n)`` shows as n seconds plus the time since (±1 s
    for rounding), which on a loaded machine can be several seconds."""

    def __init__(self) -> None:
        self.start = time.monotonic()

    def check(self, shown: str, seconds: int) -> None:
        late = time.monotonic() - self.start
        match = re.fullmatch(r"(\d+)s", shown)
        assert match, shown
        assert seconds - 1 <= int(match.group(1)) <= seconds + late + 1, (shown, seconds, late)


def events_section(describe_output: str) -> list[str]:
    lines = describe_output.splitlines()
    start = lines.index("Events:")
    return lines[start + 1 :]


def core_event(name: str, target, *, reason: str, message: str, kind: str = "Normal", **extra) -> dict:
    return {
        "metadata": {"name": name},
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": target.metadata.name,
            "namespace": NS,
            "uid": target.metadata.uid,
        },
        "reason": reason,
        "message": message,
        "type": kind,
        **extra,
    }


def test_describe_pod_shows_its_core_events_with_counts(kubectl, core):
    ages = Ages()
    target = core.create_namespaced_pod(NS, pod("web"))
    other = core.create_namespaced_pod(NS, pod("other"))
    core.create_namespaced_event(
        NS,
        core_event(
            "web.1", target, reason="Scheduled", message="Successfully assigned default/web to node-a",
            source={"component": "default-scheduler"}, firstTimestamp=ago(60), lastTimestamp=ago(60), count=1,
        ),
    )
    core.create_namespaced_event(
        NS,
        core_event(
            "web.2", target, reason="BackOff", message="Back-off restarting failed container main", kind="Warning",
            source={"component": "kubelet", "host": "node-a"}, firstTimestamp=ago(50), lastTimestamp=ago(5), count=7,
        ),
    )
    core.create_namespaced_event(
        NS, core_event("other.1", other, reason="Pulled", message="not about web", source={"component": "kubelet"})
    )
    # same name and namespace, but an older pod's uid: describe filters on uid too
    stale = core_event("web.old", target, reason="Killing", message="an earlier pod called web")
    stale["involvedObject"]["uid"] = "00000000-0000-0000-0000-000000000000"
    core.create_namespaced_event(NS, stale)

    section = events_section(kubectl.run("describe", "pod", "web").stdout)
    assert section[0].split() == ["Type", "Reason", "Age", "From", "Message"]
    assert section[1].split() == ["----", "------", "----", "----", "-------"]
    body = [line for line in section[2:] if line.strip()]
    assert len(body) == 2, section
    scheduled, backoff = (re.split(r"\s{2,}", line.strip()) for line in body)
    assert scheduled[:2] == ["Normal", "Scheduled"]
    ages.check(scheduled[2], 60)
    assert scheduled[3:] == ["default-scheduler", "Successfully assigned default/web to node-a"]
    assert backoff[:2] == ["Warning", "BackOff"]
    last, over = re.fullmatch(r"(\S+) \(x7 over (\S+)\)", backoff[2]).groups()
    ages.check(last, 5)
    ages.check(over, 50)
    # kubectl 1.32 shows the component only (not ", <host>")
    assert backoff[3:] == ["kubelet", "Back-off restarting failed container main"]

    quiet = events_section(kubectl.run("describe", "pod", "other").stdout)
    assert [line.split()[:2] for line in quiet[2:] if line.strip()] == [["Normal", "Pulled"]]


def test_describe_pod_with_no_events_says_none(kubectl, core):
    core.create_namespaced_pod(NS, pod("quiet"))
    out = kubectl.run("describe", "pod", "quiet").stdout
    assert out.rstrip("\n").splitlines()[-1] == "Events:           <none>"


def test_an_events_k8s_io_event_is_shown_by_describe_and_by_core_v1(kubectl, k8s, core):
    events_v1 = kubernetes.client.EventsV1Api(k8s)
    ages = Ages()
    target = core.create_namespaced_pod(NS, pod("api"))
    events_v1.create_namespaced_event(
        NS,
        {
            "metadata": {"name": "api.new"},
            "eventTime": ago(30, micro=True),
            "regarding": {"apiVersion": "v1", "kind": "Pod", "name": "api", "namespace": NS, "uid": target.metadata.uid},
            "reason": "Pulling",
            "note": 'Pulling image "nginx:1.27"',
            "type": "Normal",
            "action": "Pull",
            "reportingController": "kubelet",
            "reportingInstance": "node-b",
            "series": {"count": 3, "lastObservedTime": ago(10, micro=True)},
        },
    )
    as_core = core.read_namespaced_event("api.new", NS)
    assert as_core.involved_object.uid == target.metadata.uid
    assert as_core.message == 'Pulling image "nginx:1.27"'
    assert as_core.reporting_component == "kubelet"
    assert as_core.series.count == 3

    core.create_namespaced_event(
        NS,
        core_event(
            "api.old", target, reason="Scheduled", message="Successfully assigned default/api to node-b",
            source={"component": "default-scheduler"}, firstTimestamp=ago(40), lastTimestamp=ago(40), count=1,
        ),
    )
    listed = events_v1.list_namespaced_event(NS, field_selector=f"regarding.uid={target.metadata.uid}")
    assert sorted((e.metadata.name, e.note) for e in listed.items) == [
        ("api.new", 'Pulling image "nginx:1.27"'),
        ("api.old", "Successfully assigned default/api to node-b"),
    ]

    section = events_section(kubectl.run("describe", "pod", "api").stdout)
    body = [re.split(r"\s{2,}", line.strip()) for line in section[2:] if line.strip()]
    by_reason = {fields[1]: fields for fields in body}
    assert set(by_reason) == {"Pulling", "Scheduled"}
    pulling = by_reason["Pulling"]
    assert pulling[0] == "Normal"
    last, over = re.fullmatch(r"(\S+) \(x3 over (\S+)\)", pulling[2]).groups()
    ages.check(last, 10)
    ages.check(over, 30)
    assert pulling[3:] == ["kubelet", 'Pulling image "nginx:1.27"']

    table = kubectl.run("get", "events", "--field-selector", "involvedObject.name=api").stdout.splitlines()
    assert table[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    cells = sorted((re.split(r"\s{2,}", line.strip()) for line in table[1:]), key=lambda r: r[2])
    assert [r[1:] for r in cells] == [
        ["Normal", "Pulling", "pod/api", 'Pulling image "nginx:1.27"'],
        ["Normal", "Scheduled", "pod/api", "Successfully assigned default/api to node-b"],
    ]
    # LAST SEEN is the series' last observation ("(xN over ...)" is describe's, not the table's)
    ages.check(cells[0][0], 10)
    ages.check(cells[1][0], 40)
