"""``k8py apiserver`` serves HTTPS by default: a self-signed pair in --cert-dir, kept across restarts."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.apiserver.authn.conftest import kubectl

pytestmark = pytest.mark.kubectl


def _start(data_dir: str, *args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "k8py", "apiserver", "--data-dir", data_dir, "--secure-port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        m = re.search(r"listening on (https://\S+)", line)
        if m:
            return proc, m.group(1)
    proc.wait(10)
    raise AssertionError("no HTTPS listener:\n" + "".join(lines))


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    proc.wait(30)


def test_secure_by_default_with_a_reused_self_signed_certificate(tmp_path):
    data = str(tmp_path / "data")
    proc, url = _start(data)
    try:
        assert url.startswith("https://127.0.0.1:")
        cert_file = os.path.join(data, "certs", "apiserver.crt")
        first = open(cert_file, "rb").read()
        assert oct(os.stat(os.path.join(data, "certs", "apiserver.key")).st_mode & 0o777) == "0o600"
        # the kubeconfig it writes trusts the certificate and holds an admin client certificate
        kc = os.path.join(data, "kubeconfig")
        assert "certificate-authority-data" in open(kc).read()
        assert oct(os.stat(kc).st_mode & 0o777) == "0o600"
        out = kubectl(kc, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username} {.status.userInfo.groups}").stdout
        assert out == 'system:admin ["system:masters","system:authenticated"]'
        assert "kube-system" in kubectl(kc, "get", "namespaces").stdout
    finally:
        _stop(proc)
    proc, _ = _start(data)
    try:
        assert open(cert_file, "rb").read() == first
    finally:
        _stop(proc)


def test_insecure_port_alone_serves_only_plain_http(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "k8py", "apiserver", "--data-dir", str(tmp_path), "--insecure-port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert re.search(r"listening on http://127\.0\.0\.1:\d+ \(insecure", line), line
        assert not os.path.exists(tmp_path / "certs")
    finally:
        _stop(proc)


def test_insecure_port_on_a_public_address_is_a_usage_error(tmp_path):
    result = subprocess.run([sys.executable, "-m", "k8py", "apiserver", "--data-dir", str(tmp_path), "--insecure-port", "0",
                             "--insecure-bind-address", "0.0.0.0"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "loopback only" in result.stderr
