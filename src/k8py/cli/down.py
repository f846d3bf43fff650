"""``k8py down``: stop the cluster of a data directory and leave nothing of it behind.

The supervisor (its pid in ``DATA_DIR/cluster.json``) is asked to stop
(SIGTERM, then SIGKILL after ``--timeout``) and stops its components in
order; when it was killed itself, its components' process groups are sent
SIGTERM here. Then whatever a killed process could not remove is: processes
the kubelets started (:func:`~k8py.cluster.sweep.sweep`), the nodes' pod
network namespaces, bridges and cgroups, the proxies' nftables tables, the
cluster DNS address, each node's containerd leftovers, and with a containerd
k8py did not start, this cluster's pod sandboxes in it. Each step is a no-op
when there is nothing to remove, so ``k8py down`` can be run twice.
``k8py up`` in the foreground calls :func:`cleanup_containerd` and
:func:`remove_pods_from_runtime` itself when it stops.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time

__all__ = ["run_down", "cleanup_containerd", "remove_pods_from_runtime", "delete_proxy_tables"]


def run_down(args: argparse.Namespace) -> int:
    from k8py.cluster.state import pid_alive, read_state
    from k8py.cluster.sweep import processes_of, sweep

    data_dir = os.path.abspath(os.path.expanduser(args.data_dir))
    state = read_state(data_dir)
    if state and pid_alive(state.get("pid")):
        os.kill(state["pid"], signal.SIGTERM)
        deadline = time.monotonic() + args.timeout
        while pid_alive(state["pid"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        if pid_alive(state["pid"]):
            os.kill(state["pid"], signal.SIGKILL)
    elif not processes_of(data_dir):
        # nothing runs, but a cluster killed (or only stopped) may have left its host state: remove it
        from k8py.kubelet.node_cleanup import cleanup_under

        cleanup_under(os.path.join(data_dir, "kubelet"))
        print(f"k8py down: no cluster is running in {data_dir}")
        return 0
    for name, comp in ((state or {}).get("components") or {}).items():
        if pid_alive(comp.get("pid")):
            try:
                os.killpg(comp["pid"], signal.SIGTERM)
            except OSError:
                pass
    swept = sweep(data_dir)
    from k8py.kubelet.node_cleanup import cleanup_under

    cleaned = cleanup_under(os.path.join(data_dir, "kubelet"))  # the nodes' pod namespaces, bridges and cgroups
    delete_proxy_tables(data_dir, cleaned)
    from k8py.cluster import dns_address

    if (state or {}).get("containerRuntimeEndpoint") and os.geteuid() == 0:
        remove_pods_from_runtime(data_dir, state["containerRuntimeEndpoint"], list(state.get("nodes") or []))
    if os.geteuid() == 0:
        dns_address.remove(data_dir)  # the cluster DNS address of pods in their own namespaces
    containerd_nodes = cleanup_containerd(data_dir)  # shims, containers, bridges, cgroups of each node's containerd
    delete_proxy_tables(data_dir, containerd_nodes)
    cleaned += [n for n in containerd_nodes if n not in cleaned]
    print(f"k8py down: stopped the cluster in {data_dir}" + (f" ({len(swept)} leftover processes ended)" if swept else "")
          + (f"; removed the host state of {', '.join(cleaned)}" if cleaned else ""))
    return 0


def remove_pods_from_runtime(data_dir: str, endpoint: str, nodes: list[str]) -> int:
    """With a containerd k8py did not start: stop and remove the sandboxes of this cluster's pods (the
    pods with a cgroup below its nodes' cgroup parents), then those parents. Returns how many went."""
    from k8py.cluster.containerd import ContainerdLayout
    from k8py.cluster.containerd_cleanup import pod_uids, remove_cgroups

    layouts = [ContainerdLayout.for_node(data_dir, node) for node in nodes]
    uids = set().union(*(pod_uids(layout) for layout in layouts)) if layouts else set()
    removed = 0
    if uids:
        from k8py.kubelet.runtime.cri.client import CRIClient

        async def remove() -> int:
            count = 0
            async with CRIClient(endpoint, timeout=60) as cri:
                for sandbox in await cri.list_pod_sandbox():
                    if sandbox.metadata.uid in uids:
                        await cri.stop_pod_sandbox(sandbox.id)
                        await cri.remove_pod_sandbox(sandbox.id)
                        count += 1
            return count

        try:
            removed = asyncio.run(remove())
        except Exception as err:  # the runtime is gone or refuses: say so, leave it
            print(f"k8py down: could not remove this cluster's pods from {endpoint}: {err}", file=sys.stderr)
    for layout in layouts:
        remove_cgroups(layout)
    return removed


def cleanup_containerd(data_dir: str) -> list[str]:
    """Each node's containerd leftovers (a supervisor killed before it could remove them), then the machine's
    ip_forward once no k8py bridge is left. Returns the nodes that had some."""
    from k8py.cluster.containerd import ContainerdLayout
    from k8py.cluster.containerd_cleanup import cleanup

    base = os.path.join(data_dir, "containerd")
    nodes = sorted(os.listdir(base)) if os.path.isdir(base) and os.geteuid() == 0 else []
    found = [node for node in nodes if cleanup(ContainerdLayout.for_node(data_dir, node))]
    if nodes:
        from k8py.kubelet.network import host

        asyncio.run(host.restore_machine_settings())
    return found


def delete_proxy_tables(data_dir: str, nodes: list[str]) -> None:
    """The nftables proxy deletes its table when it stops; one killed before that leaves it: remove it."""
    import shutil
    import subprocess

    from k8py.cluster.spec import proxy_nftables_table
    from k8py.proxy.nftables.ruleset import delete

    if not nodes or not shutil.which("nft") or os.geteuid() != 0:
        return
    for node in nodes:
        subprocess.run(["nft", "-f", "-"], input=delete(proxy_nftables_table(data_dir, node)), text=True, capture_output=True)
