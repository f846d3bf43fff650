"""``k8py up --etcd-servers URL --apiservers 2``: the control plane on a real
etcd, two API servers behind the ``kubernetes`` Service, a pod running."""

from __future__ import annotations

import json

import pytest

from k8py.cluster.state import read_state
from tests.support.etcd import fresh_prefix, session_etcd
from tests.cluster.up_helpers import k8py, wait_for
from tests.support.kube import Kubectl

pytestmark = [pytest.mark.kubectl, pytest.mark.etcd, pytest.mark.slow]


def test_two_api_servers_on_etcd_behind_the_kubernetes_service(tmp_path):
    data = str(tmp_path / "cluster")
    urls = ",".join(session_etcd().client_urls)
    try:
        up = k8py("up", "--detach", "--data-dir", data, "--port", "0", "--etcd-servers", urls, "--etcd-prefix", fresh_prefix(),
                  "--apiservers", "2", "--no-dns", "--no-proxy")
        assert up.returncode == 0, up.stdout + up.stderr
        assert "apiserver up" in up.stdout and "apiserver-1 up" in up.stdout
        state = read_state(data)
        kubectl = Kubectl(state["api"], str(tmp_path / "home"), state["kubeconfig"])
        second = Kubectl(f"https://127.0.0.1:{state['ports']['apiserver-1']}", str(tmp_path / "home2"), state["kubeconfig"])

        kubectl.run("run", "one", "--image=nginx")
        wait_for(lambda: second.run("get", "pod", "one", "-o", "jsonpath={.status.phase}").stdout == "Running",
                 "the pod Running, seen through the second API server")

        def servers() -> set[tuple[str, int]]:
            ep = json.loads(kubectl.run("get", "endpoints", "kubernetes", "-o", "json").stdout)
            return {(a["ip"], p["port"]) for s in ep.get("subsets") or [] for a in s.get("addresses", []) for p in s.get("ports", [])}

        expected = {("127.0.0.1", state["ports"]["apiserver"]), ("127.0.0.1", state["ports"]["apiserver-1"])}
        wait_for(lambda: servers() == expected, f"the kubernetes Service to list both API servers {expected}", timeout=60)
    finally:
        k8py("down", "--data-dir", data)
