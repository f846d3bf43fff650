"""The official ``kubernetes`` client and the real ``kubectl``, pointed at a test server."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

import kubernetes
import yaml

from k8py.cli.kubeconfig import write_kubeconfig

__all__ = ["official_client", "Kubectl", "KUBECTL"]

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"


def official_client(url: str) -> kubernetes.client.ApiClient:
    config = kubernetes.client.Configuration()
    config.host = url
    return kubernetes.client.ApiClient(config)


@dataclass
class Kubectl:
    """Runs the real kubectl with its own HOME (a cold discovery cache) and kubeconfig.

    ``cluster_kubeconfig``: a kubeconfig with credentials (a ``k8py up``
    cluster's admin one), copied with its server set to ``url``; without it,
    a kubeconfig with no credentials (a plain-HTTP test server)."""

    url: str
    home: str
    cluster_kubeconfig: str = ""

    def __post_init__(self) -> None:
        os.makedirs(self.home, exist_ok=True)
        path = os.path.join(self.home, "kubeconfig")
        if self.cluster_kubeconfig:
            with open(self.cluster_kubeconfig) as f:
                doc = yaml.safe_load(f)
            for cluster in doc["clusters"]:
                cluster["cluster"]["server"] = self.url
            with open(path, "w") as f:
                yaml.safe_dump(doc, f)
            os.chmod(path, 0o600)
            self.kubeconfig = path
        else:
            self.kubeconfig = write_kubeconfig(path, self.url)

    @property
    def env(self) -> dict[str, str]:
        """The environment kubectl runs in: this HOME (its discovery cache) and kubeconfig."""
        return {**os.environ, "HOME": self.home, "KUBECONFIG": self.kubeconfig}

    def run(self, *args: str, input: str | None = None, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = self.env
        result = subprocess.run([KUBECTL, *args], capture_output=True, text=True, input=input, timeout=timeout, env=env)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
        return result

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen([KUBECTL, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env)
