"""Writing a kubeconfig that points kubectl (and any client) at a k8py server."""

from __future__ import annotations

import os

import yaml

__all__ = ["write_kubeconfig", "kubeconfig_document"]


def kubeconfig_document(server_url: str, *, name: str = "k8py") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server_url}}],
        "users": [{"name": name, "user": {}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}],
        "current-context": name,
        "preferences": {},
    }


def write_kubeconfig(path: str, server_url: str, *, name: str = "k8py") -> str:
    """Write (atomically) and return the path."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        yaml.safe_dump(kubeconfig_document(server_url, name=name), f, sort_keys=False)
    os.replace(tmp, path)
    return path
