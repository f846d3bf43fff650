"""Two API servers on a 3-member etcd cluster while members and a server die.

The API servers are real processes given all three etcd URLs, leader first
(so killing the leader kills the member both servers talk to and watch). Two
writers record every acknowledged ConfigMap create, one through each server,
and a watch through B runs across the etcd failures. Then, in order:

1. the etcd leader is SIGKILLed: writes through both servers resume after the
   election, the member is restarted;
2. a follower is SIGKILLed (the one the servers' watches moved to, when etcd's
   metrics show it): writes resume, it is restarted. The watch through B
   never breaks, never relists, and sees every acknowledged write with its
   resourceVersion: the servers' caches followed etcd across both failovers
   without a reload;
3. API server A is SIGKILLed. A Secret watch that was live on A reconnects to
   B and resumes from its last resourceVersion (still in B's watch-cache
   history) without a relist; a watch that stopped long ago (its version has
   left B's small ``--watch-cache-size`` history) gets 410 Expired from B,
   relists and goes on from the list;
4. every acknowledged write is in the store, with its uid.
"""

from __future__ import annotations

import json
import signal
import time
import urllib.request
from typing import Iterator

import kubernetes
import pytest

from k8py.cli.etcd import EtcdCluster, start_etcd_cluster
from tests.etcd.failover_kit import FailoverWatch, Writer
from tests.support.etcd import etcd_installed
from tests.support.kube import official_client
from tests.support.servers import ServerProcess

pytestmark = [
    pytest.mark.etcd,
    pytest.mark.slow,
    pytest.mark.timeout(90),
    pytest.mark.skipif(not etcd_installed(), reason="etcd not installed"),
]

NS = "default"
CACHE_SIZE = 20  # events of history per resource on each API server
RESUME_TIMEOUT = 20.0


@pytest.fixture
def cluster(tmp_path) -> Iterator[EtcdCluster]:
    c = start_etcd_cluster(str(tmp_path / "etcd"), members=3)
    try:
        yield c
    finally:
        c.stop()


def watcher_count(cluster: EtcdCluster, index: int) -> int:
    with urllib.request.urlopen(f"{cluster.client_urls[index]}/metrics", timeout=2) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith("etcd_debugging_mvcc_watcher_total "):
                return int(float(line.split()[1]))
    return 0


def wait_leader(cluster: EtcdCluster, timeout: float = 15.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        leader = cluster.leader_index()
        if leader is not None:
            return leader
        time.sleep(0.1)
    raise TimeoutError("no etcd leader")


def wait_writes_resume(writers: list[Writer], since: float) -> float:
    """Seconds until every writer has had a write acknowledged after ``since``."""
    deadline = since + RESUME_TIMEOUT
    while time.monotonic() < deadline:
        if all(w.acked_since(since) for w in writers):
            return time.monotonic() - since
        time.sleep(0.05)
    raise AssertionError(f"writes did not resume within {RESUME_TIMEOUT}s: {[(w.tag, w.failures) for w in writers]}")


def kill_member_and_recover(cluster: EtcdCluster, index: int, writers: list[Writer]) -> float:
    cluster.kill(index, signal.SIGKILL)
    pause = wait_writes_resume(writers, time.monotonic())
    cluster.restart(index)
    return pause


def raw_watch_first_line(url: str, path: str) -> dict:
    with urllib.request.urlopen(f"{url}{path}", timeout=10) as resp:
        assert resp.status == 200
        return json.loads(resp.readline())


def secret(name: str) -> dict:
    return {"metadata": {"name": name}, "stringData": {"k": name}}


def test_api_keeps_serving_through_etcd_member_and_api_server_failures(cluster, tmp_path):
    leader = wait_leader(cluster)
    order = [leader] + [i for i in range(3) if i != leader]
    servers_arg = ",".join(cluster.client_urls[i] for i in order)
    procs = [
        ServerProcess.on_etcd(str(tmp_path / name), servers_arg, "/registry", "--watch-cache-size", str(CACHE_SIZE), "--log-level", "INFO")
        for name in ("a", "b")
    ]
    clients: list[kubernetes.client.ApiClient] = []
    writers: list[Writer] = []
    watches: list[FailoverWatch] = []
    try:
        for p in procs:
            p.start()
        clients = [official_client(p.url) for p in procs]
        a, b = (kubernetes.client.CoreV1Api(c) for c in clients)
        start_rv = b.list_namespaced_config_map(NS).metadata.resource_version
        across = FailoverWatch([b], NS, "config_map", resource_version=start_rv).start()
        watches.append(across)
        writers = [Writer(a, NS, "wa").start(), Writer(b, NS, "wb").start()]
        wait_writes_resume(writers, time.monotonic())

        # 1-2: the etcd leader, then a follower (where the watches went)
        pause_leader = kill_member_and_recover(cluster, leader, writers)
        new_leader = wait_leader(cluster)
        followers = [i for i in range(3) if i != new_leader]
        watched = [i for i in followers if watcher_count(cluster, i) > 0]
        victim = (watched or followers)[0]
        pause_follower = kill_member_and_recover(cluster, victim, writers)
        cluster.wait_healthy()
        assert pause_leader < RESUME_TIMEOUT and pause_follower < RESUME_TIMEOUT

        acked = {ack.name: ack for w in writers for ack in w.acks}
        assert across.wait_for(set(acked), timeout=10), "the watch through B missed acknowledged writes"
        assert (across.reconnects, across.ends, across.relists, across.errors) == (0, 0, 0, [])
        seen = [(n, rv) for t, n, rv in across.events if t == "ADDED"]
        assert len(seen) == len(set(seen)), "an event was delivered twice"
        seen_rv = dict(seen)
        assert all(seen_rv[name] == ack.rv for name, ack in acked.items())
        rvs = [int(rv) for _, _, rv in across.events]
        assert rvs == sorted(rvs)
        for p in procs:
            # the cacher's etcd watch moved to another member by itself: no cache reload
            assert any("etcd watch broke, resuming" in line for line in p.output), "".join(p.output)
            assert not [line for line in p.output if "reloading caches" in line], "".join(p.output)

        # 3: API server A dies; Secret watches that were on A reconnect to B
        base_rv = a.list_namespaced_secret(NS).metadata.resource_version
        live = FailoverWatch([a, b], NS, "secret", resource_version=base_rv).start()
        watches.append(live)
        first = {f"early-{i}" for i in range(3)}
        for name in sorted(first):
            a.create_namespaced_secret(NS, secret(name))
        assert live.wait_for(first)
        stale_rv = live.rv  # where a client that disconnected now would resume
        churn = {f"churn-{i:02d}" for i in range(CACHE_SIZE + 5)}
        for name in sorted(churn):
            a.create_namespaced_secret(NS, secret(name))
        assert live.wait_for(first | churn)
        procs[0].kill(signal.SIGKILL)
        late = {f"late-{i}" for i in range(3)}
        for name in sorted(late):
            b.create_namespaced_secret(NS, secret(name))
        assert live.wait_for(late), f"no resume on B: {live.reconnects=} {live.relists=} {live.errors=}"
        assert live.reconnects >= 1 and live.relists == 0 and live.server == 1
        names = [n for t, n, _ in live.events if t == "ADDED"]
        assert names == sorted(first) + sorted(churn) + sorted(late), "resumed with a gap or a duplicate"

        # the stale version has left B's history: 410 as an ERROR event, then a relist
        expired = raw_watch_first_line(procs[1].url, f"/api/v1/namespaces/{NS}/secrets?watch=1&resourceVersion={stale_rv}")
        assert expired["type"] == "ERROR"
        assert (expired["object"]["code"], expired["object"]["reason"]) == (410, "Expired")
        stale = FailoverWatch([a, b], NS, "secret", resource_version=stale_rv).start()
        watches.append(stale)
        deadline = time.monotonic() + RESUME_TIMEOUT
        while stale.relists == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert stale.relists == 1 and stale.reconnects >= 1
        assert first | churn | late <= stale.listed
        b.create_namespaced_secret(NS, secret("after-relist"))
        assert stale.wait_for({"after-relist"}) and live.wait_for({"after-relist"})

        # 4: every acknowledged write is present, with its uid
        for w in writers:
            w.stop()
        acked = {ack.name: ack for w in writers for ack in w.acks}
        stored = {o.metadata.name: o.metadata.uid for o in b.list_namespaced_config_map(NS).items}
        missing = [n for n, ack in acked.items() if stored.get(n) != ack.uid]
        assert not missing, f"{len(missing)} acknowledged writes lost: {missing[:5]}"
        print(
            f"\nleader kill: writes resumed in {pause_leader:.2f}s; follower kill (member {victim}, "
            f"{'hosting' if watched else 'not hosting'} the watches): {pause_follower:.2f}s; "
            f"{len(acked)} acknowledged writes, {sum(w.failures for w in writers)} failed attempts"
        )
    finally:
        for w in watches:
            w.stop()
        for w in writers:
            w.stop()
        for c in clients:
            c.close()
        for p in procs:
            p.kill()
