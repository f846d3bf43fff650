"""A secure API server for the authentication tests: a PKI, a token file, HTTPS only.

``pki`` is a cluster CA with helpers to issue client certificates (also
expired ones, and ones from an untrusted CA) as files; ``secure_server`` a
real :class:`~tests.support.servers.ServerThread` listening only on HTTPS
(``secure_port=0``, no insecure port) with ``client_ca_file`` and a static
token file; ``kubeconfig_for`` writes a kubeconfig with embedded
credentials for kubectl and the official client.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
from dataclasses import dataclass
from typing import Any

import kubernetes
import pytest

from k8py.client import certs
from k8py.cli.kubeconfig import write_kubeconfig
from tests.support.kube import KUBECTL
from tests.support.servers import ServerThread, sqlite_storage

TOKENS = 'secret-alice,alice,uid-1,"devs,ops"\nsecret-bob,bob,uid-2\n'


@dataclass
class PKI:
    dir: str
    ca: certs.CertificateAuthority
    ca_file: str

    def client(self, name: str, user: str, groups: tuple[str, ...] = (), *,
               ca: certs.CertificateAuthority | None = None) -> tuple[bytes, bytes]:
        cert, key = (ca or self.ca).issue_client(user, groups)
        return certs.encode_cert_pem(cert), certs.encode_private_key_pem(key)

    def expired_client(self, user: str) -> tuple[bytes, bytes]:
        past = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=30)
        old_ca = certs.CertificateAuthority(self.ca.cert, self.ca.key, now=lambda: past)
        cert, key = old_ca.issue_client(user, validity=dt.timedelta(days=1))
        return certs.encode_cert_pem(cert), certs.encode_private_key_pem(key)


@pytest.fixture
def pki(tmp_path: Any) -> PKI:
    ca = certs.new_self_signed_ca("k8py-test-ca")
    ca_file = str(tmp_path / "ca.crt")
    certs.write_pem(ca_file, ca.cert_pem)
    return PKI(str(tmp_path), ca, ca_file)


@pytest.fixture
def secure_server(tmp_path: Any, pki: PKI):
    token_file = tmp_path / "tokens.csv"
    token_file.write_text(TOKENS)
    with ServerThread(sqlite_storage(str(tmp_path / "data")), secure_port=0, insecure_port=None,
                      client_ca_file=pki.ca_file, token_auth_file=str(token_file)) as server:
        yield server


def kubeconfig_for(server: ServerThread, path: str, *, cert: tuple[bytes, bytes] | None = None,
                   token: str | None = None) -> str:
    assert server.server is not None and server.server.serving is not None
    return write_kubeconfig(path, server.url, ca_data=server.server.serving.ca_pem,
                            client_cert_data=cert[0] if cert else None,
                            client_key_data=cert[1] if cert else None, token=token)


def kubectl(kubeconfig: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    home = os.path.dirname(kubeconfig)
    env = {**os.environ, "HOME": home, "KUBECONFIG": kubeconfig}
    result = subprocess.run([KUBECTL, *args], capture_output=True, text=True, timeout=60, env=env)
    if check and result.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def official_client_from(kubeconfig: str) -> kubernetes.client.ApiClient:
    return kubernetes.config.new_client_from_config(config_file=kubeconfig)
