"""``k8py status``: a cluster's components (from ``cluster.json``), its nodes
(from the API server) and where the logs are."""

from __future__ import annotations

import urllib.request

import orjson

from k8py.cluster.pki import ClusterPKI
from k8py.cluster.readiness import node_is_ready
from k8py.cluster.state import pid_alive, read_state

__all__ = ["print_status"]


def _nodes(api: str, data_dir: str) -> list[dict] | None:  # type: ignore[type-arg]
    try:
        context = ClusterPKI(data_dir).client_ssl_context() if api.startswith("https://") else None
        with urllib.request.urlopen(f"{api}/api/v1/nodes", timeout=5, context=context) as response:
            return list(orjson.loads(response.read()).get("items") or [])
    except OSError:
        return None


def print_status(data_dir: str) -> int:
    state = read_state(data_dir)
    if not state or not pid_alive(state.get("pid")):
        print(f"k8py: no cluster is running in {data_dir}. Start one with `k8py up --data-dir {data_dir}`.")
        return 1
    print(f"cluster in {data_dir}: {'ready' if state.get('ready') else 'starting'}; supervisor pid {state['pid']}; API {state['api']}")
    print(f"kubeconfig: {state['kubeconfig']}")
    rows = [("COMPONENT", "PID", "STATE", "RESTARTS", "LOG")]
    for name, comp in state.get("components", {}).items():
        alive = pid_alive(comp.get("pid"))
        rows.append((name, str(comp.get("pid") or "-"), comp.get("state", "?") if alive else "down", str(comp.get("restarts", 0)), comp.get("log", "")))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[4])
    nodes = _nodes(state["api"], data_dir)
    if nodes is None:
        print("nodes: the API server does not answer")
        return 1
    ready = sum(1 for n in nodes if node_is_ready(n))
    print(f"nodes: {ready}/{len(nodes)} Ready")
    for node in nodes[:20]:
        print(f"  {node['metadata']['name']}  {'Ready' if node_is_ready(node) else 'NotReady'}  podCIDR={node.get('spec', {}).get('podCIDR', '-')}")
    if len(nodes) > 20:
        print(f"  … and {len(nodes) - 20} more (kubectl get nodes)")
    return 0
