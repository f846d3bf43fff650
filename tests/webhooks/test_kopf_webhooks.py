"""A kopf operator's admission webhooks against k8py: kopf starts its
WebhookServer, writes its own Validating/MutatingWebhookConfiguration, and
k8py calls them for custom resources — the validating one refuses, the
mutating one fills a default that is stored."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from k8py.client.certs import encode_cert_pem, encode_private_key_pem, new_self_signed_ca
from tests.compat.test_kopf import _wait_for
from tests.compat.test_kopf_crd import CRD as COMPAT_CRD
from tests.support.kube import Kubectl
from tests.support.servers import ServerThread, sqlite_storage

pytestmark = pytest.mark.kubectl

OPERATOR = os.path.join(os.path.dirname(__file__), "kopf_webhook_operator.py")
CRD = COMPAT_CRD.replace("              cronSpec: {type: string}\n",
                         "              cronSpec: {type: string}\n              image: {type: string}\n")


@pytest.fixture
def kubectl(tmp_path):
    with ServerThread(sqlite_storage(str(tmp_path / "data"))) as server:
        yield Kubectl(server.url, str(tmp_path / "home"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_kopf_operators_admission_webhooks_validate_and_mutate_custom_resources(kubectl: Kubectl, tmp_path) -> None:
    ca = new_self_signed_ca("kopf-webhook-ca")
    cert, key = ca.issue_serving("kopf-webhook", ips=("127.0.0.1",), dns_names=("localhost",))
    paths = {"WEBHOOK_CERT": tmp_path / "tls.crt", "WEBHOOK_KEY": tmp_path / "tls.key", "WEBHOOK_CA": tmp_path / "ca.crt"}
    paths["WEBHOOK_CERT"].write_bytes(encode_cert_pem(cert))
    paths["WEBHOOK_KEY"].write_bytes(encode_private_key_pem(key))
    paths["WEBHOOK_CA"].write_bytes(ca.cert_pem)
    kubectl.run("apply", "-f", "-", input=CRD)
    kubectl.run("wait", "--for=condition=Established", "crd/crontabs.stable.example.com", "--timeout=60s")
    env = {**os.environ, "KUBECONFIG": kubectl.kubeconfig, "HOME": kubectl.home, "WEBHOOK_PORT": str(_free_port()),
           **{k: str(v) for k, v in paths.items()}}
    operator = subprocess.Popen(
        [sys.executable, "-m", "kopf", "run", "--standalone", "--all-namespaces", OPERATOR],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        def managed() -> bool:
            out = kubectl.run("get", "validatingwebhookconfigurations,mutatingwebhookconfigurations", "-o", "name").stdout
            return "auto.kopf.dev" in out and out.count("auto.kopf.dev") == 2
        assert _wait_for(managed, timeout=60), "kopf never wrote its webhook configurations"
        validating = json.loads(kubectl.run("get", "validatingwebhookconfiguration", "auto.kopf.dev", "-o", "json").stdout)
        (hook,) = validating["webhooks"]
        refused = kubectl.run("apply", "-f", "-", check=False, input=json.dumps({
            "apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": "bad"}, "spec": {"cronSpec": "never"}}))
        assert refused.returncode == 1
        assert refused.stderr == (f'Error from server: error when creating "STDIN": admission webhook "{hook["name"]}" '
                                  "denied the request: cronSpec 'never' is not a schedule\n")
        kubectl.run("apply", "-f", "-", input=json.dumps({
            "apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": "good"}, "spec": {"cronSpec": "0 3 * * *"}}))
        stored = json.loads(kubectl.run("get", "crontab", "good", "-o", "json").stdout)
        assert stored["spec"] == {"cronSpec": "0 3 * * *", "image": "busybox", "replicas": 1}
    finally:
        operator.terminate()
        try:
            out, _ = operator.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            operator.kill()
            out, _ = operator.communicate()
        if sys.exc_info()[0] is not None:
            print(out[-5000:])
