"""docs/12-services.md: the Verification section, on the processes the Services
e2e suite starts (API server, controller manager, scheduler, a kubelet with
--cluster-dns, k8py proxy, k8py dns) and the real kubectl."""

from __future__ import annotations

import os
import re
import urllib.request

import pytest

from tests.proxy.test_services_e2e import stack, wait_for  # noqa: F401  (the module-scoped cluster fixture)

pytestmark = [pytest.mark.kubectl, pytest.mark.slow]

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "12-services.md")


def _manifest() -> str:
    text = open(DOC, encoding="utf-8").read()
    return re.search(r"kubectl apply -f - <<'EOF'\n(.*?)\nEOF\n", text, re.S).group(1)


def test_services_walkthrough_verification(stack) -> None:  # noqa: F811
    kubectl = stack.kubectl
    assert kubectl.run("apply", "-f", "-", input=_manifest()).stdout.strip() == "deployment.apps/web created"
    assert kubectl.run("expose", "deployment", "web", "--port", "80", "--target-port", "8080").stdout.strip() == "service/web exposed"
    wait_for(lambda: len(stack.ready_pods("web")) == 2, "two ready pods")
    ips = sorted(p["status"]["podIP"] for p in stack.ready_pods("web"))

    def listed():
        rows = kubectl.run("get", "endpointslices", "-l", "kubernetes.io/service-name=web").stdout.splitlines()
        return len(rows) == 2 and rows[1].split()[2] == "8080" and sorted(rows[1].split()[3].split(",")) == ips and rows

    rows = wait_for(listed, "the slice to list both pods")
    assert rows[0].split()[:4] == ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS"]
    vip = kubectl.run("get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}").stdout

    def first_line():
        with urllib.request.urlopen(f"http://{vip}/", timeout=5) as r:
            return r.read().decode().splitlines()[0]

    assert wait_for(first_line, "the cluster IP to answer") == "<!DOCTYPE HTML>"
    out = kubectl.run("exec", "deploy/web", "--", "python3", "-c", "import socket; print(socket.gethostbyname('web'))").stdout
    assert out.strip() == vip
