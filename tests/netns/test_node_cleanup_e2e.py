"""What ``k8py down`` does for a node whose kubelet and proxy were killed with pods running:
``node_cleanup.cleanup_under`` removes its namespaces, bridge and cgroups, and the
proxy's table goes too (root only, see conftest.py)."""

from __future__ import annotations

import signal
import subprocess

from k8py.kubelet.node_cleanup import cleanup_under
from tests.netns.conftest import NetCluster, running

NS = "default"


def test_a_killed_node_is_cleaned_up_by_its_root_dir(cluster: NetCluster, tmp_path) -> None:
    for name in ("a", "b"):
        cluster.core.create_namespaced_pod(NS, {"metadata": {"name": name}, "spec": {"nodeName": cluster.node, "containers": [
            {"name": "c", "image": "python", "command": ["python3", "-c", "import time; time.sleep(3600)"],
             "resources": {"limits": {"memory": "64Mi"}}}]}})
    cluster.wait(lambda: all(running(cluster.pod(NS, n)) for n in ("a", "b")), "two pods running")
    vip = cluster.core.create_namespaced_service(NS, {"metadata": {"name": "s"}, "spec": {"selector": {"x": "y"}, "ports": [{"port": 80}]}}
                                                 ).spec.cluster_ip
    cluster.wait(lambda: vip in subprocess.run(["nft", "list", "table", "ip", f"k8py-{cluster.node}"], capture_output=True,
                                               text=True).stdout, "the proxy's table")
    left = cluster.leftovers()
    assert len(left.get("netns", [])) == 2 and left.get("links") and left.get("cgroups"), left
    # killed: neither the kubelet nor the proxy gets to clean anything
    cluster.kubelet.stop(signal.SIGKILL)
    cluster.proxy.proc.send_signal(signal.SIGKILL)
    cluster.proxy.proc.wait(30)
    # the containers keep running; cleanup_under kills what is left in the node's cgroups itself
    root = cluster.kubelet.root_dir
    import os

    cleaned = cleanup_under(os.path.dirname(root))
    assert cleaned == [cluster.node]
    # a proxy run on its own (not by k8py up) owns the table k8py-<node>; the killed one left it
    from k8py.proxy.nftables.ruleset import delete, table_name

    subprocess.run(["nft", "-f", "-"], input=delete(table_name(cluster.node)), text=True, capture_output=True, check=True)
    assert cluster.leftovers() == {}
