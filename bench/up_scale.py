"""``k8py up --simulated-nodes N`` at scale: kwok's CI scenario (issue 13).

N simulated nodes, then one Deployment of M pods run and deleted: the time
until all nodes are Ready, all pods Running, all of them deleted, with
memory per node and per pod, against kwok's CI budgets (5,000 nodes Ready
< 60 s, 10,000 pods Running < 60 s, deleted < 90 s; k8py's targets < 30 s
each). Beside each phase: the API requests it made, by verb and resource,
and the CPU each component used (in all, and per node or per pod).

Between the nodes' start and the pods, the cluster is measured idle, once
the start-up's own writes are over (each node's Lease created and its first
status report written, which run for one renewal period after the last node
registers): then its only writes are the Lease renewals, and the CPU per
request of that window is the cost of one renewal, which the pods' phases
subtract to show their CPU per pod without the renewals that fell in them.

    python bench/up_bench.py --runs 0 --simulated-nodes 5000 --pods 10000
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from cluster_probe import admin_context, get, pss_mb, until  # noqa: E402

from k8py.cluster.state import read_state  # noqa: E402

__all__ = ["simulated"]


def _pss_by_component(data: str, supervisor: int) -> dict[str, float]:
    """PSS (MB) of the supervisor and of each component with its descendants."""
    state = read_state(data) or {}
    out = {"supervisor": pss_mb([supervisor])}
    for name, comp in (state.get("components") or {}).items():
        if comp.get("pid"):
            out[name] = pss_mb([comp["pid"]])
    return out


def _requests(api: str, ctx: Any) -> dict[str, float]:
    """apiserver_request_total by "VERB resource[/subresource]" (the API server's /metrics)."""
    try:
        with urllib.request.urlopen(f"{api}/metrics", timeout=60, context=ctx) as r:
            text = r.read().decode()
    except OSError:
        return {}
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("apiserver_request_total{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}", 1)[0]))
            sub = labels.get("subresource")
            key = f"{labels.get('verb', '?')} {labels.get('resource', '?')}{'/' + sub if sub else ''}"
            out[key] = out.get(key, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


def _cpu_seconds(data: str, supervisor: int) -> dict[str, float]:
    """CPU seconds (user + system) each process has used so far."""
    tick = os.sysconf("SC_CLK_TCK")
    pids = {"supervisor": supervisor, **{name: comp["pid"] for name, comp in ((read_state(data) or {}).get("components") or {}).items()
                                         if comp.get("pid")}}
    out = {}
    for name, pid in pids.items():
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[name] = (int(fields[11]) + int(fields[12])) / tick
        except (OSError, IndexError, ValueError):
            pass
    return out


def _phase(label: str, before: dict[str, float], after: dict[str, float], seconds: float, per: tuple[int, str] | None = None,
           idle: dict[str, float] | None = None) -> dict[str, float]:
    """CPU seconds each component used in a phase; with ``per`` = (count, unit) also
    milliseconds of CPU per unit (the figure that depends less on how loaded the
    machine was). With ``idle`` (CPU seconds each component spends on one heartbeat,
    a Lease renewal, measured with nothing else to do) and the phase's heartbeats
    in it under ``"heartbeats"``, also the CPU per unit without them: a phase that a
    loaded machine makes twice as long holds twice the renewals, which the plain
    figure counts against the pods. Returns the CPU seconds used."""
    used = {k: after[k] - before.get(k, 0.0) for k in after}
    ranked = sorted(used.items(), key=lambda kv: -kv[1])
    print(f"  CPU during {label} ({seconds:.0f} s): " + ", ".join(f"{k} {v:.0f} s" for k, v in ranked))
    if per and per[0]:
        count, unit = per
        print(f"  CPU per {unit} during {label}: {sum(used.values()) / count * 1000:.1f} ms — "
              + ", ".join(f"{k} {v / count * 1000:.1f}" for k, v in ranked if v / count >= 0.00005))
        if idle:
            beats = idle.get("heartbeats", 0.0)
            net = {k: max(0.0, v - idle.get(k, 0.0) * beats) for k, v in ranked}
            print(f"  CPU per {unit} during {label} without its {beats:.0f} Lease writes (at the idle cost of one): "
                  f"{sum(net.values()) / count * 1000:.1f} ms — "
                  + ", ".join(f"{k} {v / count * 1000:.1f}" for k, v in net.items() if v / count >= 0.00005))
    return used


def _heartbeats(before: dict[str, float], after: dict[str, float]) -> float:
    return sum(after.get(k, 0.0) - before.get(k, 0.0) for k in ("PUT leases", "POST leases"))


def _per_heartbeat(cpu: dict[str, float], requests: float) -> dict[str, float]:
    """CPU seconds per request of the idle phase (Lease writes, and the last Node PATCHes of the start)."""
    return {k: v / requests for k, v in cpu.items()} if requests else {}


def _rates(label: str, before: dict[str, float], after: dict[str, float], seconds: float) -> None:
    rates = sorted(((k, (v - before.get(k, 0.0)) / seconds) for k, v in after.items()), key=lambda kv: -kv[1])
    total = sum(r for _, r in rates)
    print(f"  API requests during {label}: {total:.0f}/s — " + ", ".join(f"{k} {r:.0f}/s" for k, r in rates[:6] if r >= 0.5))


def _writes_per_pod(label: str, before: dict[str, float], after: dict[str, float], pods: int) -> None:
    """Writes (not GET/LIST/WATCH) a pod, by "VERB resource", the heartbeats apart."""
    writes = {k: (v - before.get(k, 0.0)) / pods for k, v in after.items()
              if k.split(" ")[0] in ("POST", "PUT", "PATCH", "DELETE") and "leases" not in k}
    ranked = sorted(writes.items(), key=lambda kv: -kv[1])
    print(f"  writes a pod during {label} (Leases apart): {sum(writes.values()):.2f} — "
          + ", ".join(f"{k} {v:.2f}" for k, v in ranked if v >= 0.005))


def _pod_phase(label: str, before: tuple[dict[str, float], dict[str, float]], requests: dict[str, float],
               cpu: dict[str, float], seconds: float, pods: int, per_beat: dict[str, float]) -> None:
    """A pods' phase's requests, CPU (also without its Lease writes) and writes a pod, from
    ``before`` = (requests, CPU) at its start to ``requests`` and ``cpu`` at its end."""
    req0, cpu0 = before
    _rates(label, req0, requests, seconds)
    _phase(label, cpu0, cpu, seconds, (pods, "pod"), {**per_beat, "heartbeats": _heartbeats(req0, requests)})
    _writes_per_pod(label, req0, requests, pods)


def _settle(api: str, ctx: Any, nodes: int, timeout: float = 180.0) -> tuple[float, bool]:
    """(seconds, whether it settled): until every node's Lease is created and, for 2 s, the
    cluster has written nothing but Lease renewals (see the module docstring)."""
    t0 = time.perf_counter()
    before = _requests(api, ctx)
    while time.perf_counter() - t0 < timeout:
        time.sleep(2.0)
        now = _requests(api, ctx)
        others = sum(v - before.get(k, 0.0) for k, v in now.items()
                     if k.split(" ")[0] in ("POST", "PUT", "PATCH", "DELETE") and k != "PUT leases")
        if now.get("POST leases", 0.0) >= nodes and not others:
            return time.perf_counter() - t0, True
        before = now
    return time.perf_counter() - t0, False


def simulated(nodes: int, pods: int) -> None:
    """kwok's scenario: N simulated nodes, then one Deployment of M pods run and deleted.

    Readiness is read where it is cheap at this size: all nodes Ready from
    the supervisor's state (``ready``: it has seen every expected Node Ready),
    the pods from the Deployment's status, the deletion from a one-item list,
    so that the bench's own polling does not load the server."""
    data = tempfile.mkdtemp(prefix="k8py-bench-sim-")
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "k8py", "up", "--data-dir", data, "--port", "0", "--nodes", "0",
                             "--simulated-nodes", str(nodes), "--no-proxy", "--no-dns", "--timeout", "1200"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kc = os.path.join(data, "kubeconfig")
    try:
        until(lambda: (read_state(data) or {}).get("ready") or (proc.poll() is not None and "exited"), timeout=1200, every=0.5)
        if proc.poll() is not None:
            raise RuntimeError(f"k8py up exited with {proc.returncode}; see {data}/logs")
        t_nodes = time.perf_counter() - t0
        state = read_state(data) or {}
        api = state["api"]
        ctx = admin_context(data)
        mem_nodes = _pss_by_component(data, proc.pid)
        print(f"  {nodes} simulated nodes Ready: {t_nodes:.1f} s from the command (kwok budget for 5,000: < 60 s; "
              f"supervisor saw them at {state.get('timings', {}).get('nodesReady', 0):.1f} s)")
        print("  PSS with the nodes: " + ", ".join(f"{k} {v:.0f} MB" for k, v in mem_nodes.items()))
        _phase("the start", {}, _cpu_seconds(data, proc.pid), t_nodes, (nodes, "node"))
        waited, settled = _settle(api, ctx, nodes)
        print("  the start-up's own writes (each node's Lease created, its first status report written) "
              + (f"over {waited:.1f} s after that" if settled else
                 f"still going {waited:.0f} s after that: the idle figures below include them"))
        req0, cpu0, t_idle = _requests(api, ctx), _cpu_seconds(data, proc.pid), time.perf_counter()
        time.sleep(30)
        idle = time.perf_counter() - t_idle
        from k8py.kubelet.simulated_nodes import lease_renew_interval

        renewals = nodes / lease_renew_interval(10.0, 40, nodes)
        req_idle = _requests(api, ctx)
        _rates(f"30 s idle with {nodes} nodes ({renewals:.0f}/s of lease renewals expected)", req0, req_idle, idle)
        idle_cpu = _phase("30 s idle", cpu0, _cpu_seconds(data, proc.pid), idle, (nodes, "node"))
        per_beat = _per_heartbeat(idle_cpu, sum(req_idle.values()) - sum(req0.values()))
        print(f"  CPU per request while idle: {sum(per_beat.values()) * 1000:.2f} ms — "
              + ", ".join(f"{k} {v * 1000:.2f}" for k, v in sorted(per_beat.items(), key=lambda kv: -kv[1]) if v >= 0.000005)
              + f"; the Leases alone: {sum(per_beat.values()) * nodes / lease_renew_interval(10.0, 40, nodes):.2f} CPU seconds a second")
        if pods:
            get_json = lambda path: get(f"{api}{path}", ctx)  # noqa: E731
            req1, cpu1, t1 = _requests(api, ctx), _cpu_seconds(data, proc.pid), time.perf_counter()
            subprocess.run(["kubectl", "--kubeconfig", kc, "create", "deployment", "many", "--image=nginx", f"--replicas={pods}"],
                           check=True, capture_output=True)

            def running() -> bool:
                status = (get_json("/apis/apps/v1/namespaces/default/deployments/many") or {}).get("status") or {}
                return int(status.get("readyReplicas") or 0) >= pods

            until(running, timeout=1800, every=2.0)
            t_run = time.perf_counter() - t1
            mem_pods = _pss_by_component(data, proc.pid)
            print(f"  {pods} pods Running (Ready): {t_run:.1f} s (kwok: 10,000 < 60 s)")
            _pod_phase("the pods' start", (req1, cpu1), _requests(api, ctx), _cpu_seconds(data, proc.pid), t_run, pods, per_beat)
            print("  PSS with the pods: " + ", ".join(f"{k} {v:.0f} MB" for k, v in mem_pods.items()))
            req2, cpu2, t2 = _requests(api, ctx), _cpu_seconds(data, proc.pid), time.perf_counter()
            subprocess.run(["kubectl", "--kubeconfig", kc, "delete", "deployment", "many", "--wait=false"], check=True, capture_output=True)
            until(lambda: not (get_json("/api/v1/namespaces/default/pods?limit=1") or {"items": [1]}).get("items"), timeout=1800, every=2.0)
            t_del = time.perf_counter() - t2
            print(f"  deleted: {t_del:.1f} s (kwok: < 90 s)")
            _pod_phase("the deletion", (req2, cpu2), _requests(api, ctx), _cpu_seconds(data, proc.pid), t_del, pods, per_beat)
            total_nodes, total_pods = sum(mem_nodes.values()), sum(mem_pods.values())
            print(f"  memory: {total_nodes / nodes * 1024:.0f} KB per node (whole cluster), "
                  f"{(total_pods - total_nodes) / pods * 1024:.1f} KB per pod (PSS)")
    finally:
        t_stop = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        proc.wait(300)
        print(f"  stopped (SIGTERM to exit): {time.perf_counter() - t_stop:.1f} s")
        shutil.rmtree(data, ignore_errors=True)
