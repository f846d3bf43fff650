"""Writing a kubeconfig that points kubectl (and any client) at a k8py server, and merging a k8py context into the user's."""

from __future__ import annotations

import os

import yaml

__all__ = ["write_kubeconfig", "kubeconfig_document", "merge_into_user_kubeconfig"]


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


def merge_into_user_kubeconfig(cluster_kubeconfig: str, *, name: str = "k8py", target: str | None = None) -> str:
    """Add (or replace) the ``name`` cluster, user and context from
    ``cluster_kubeconfig`` in the user's kubeconfig (the first path of
    ``$KUBECONFIG``, else ``~/.kube/config``), make it current, and return
    that file's path. Other entries are kept as they are."""
    target = target or (os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or os.path.join(os.path.expanduser("~"), ".kube", "config"))
    with open(cluster_kubeconfig) as f:
        ours = yaml.safe_load(f)
    try:
        with open(target) as f:
            doc = yaml.safe_load(f) or {}
    except FileNotFoundError:
        doc = {}
    doc.setdefault("apiVersion", "v1")
    doc.setdefault("kind", "Config")
    for key in ("clusters", "users", "contexts"):
        entry = ours[key][0]  # write_kubeconfig's document: one cluster, user and context
        entries = [e for e in doc.get(key) or [] if e.get("name") != name]
        entries.append({**entry, "name": name})
        doc[key] = entries
    for context in doc["contexts"]:
        if context["name"] == name:
            context["context"] = {**context["context"], "cluster": name, "user": name}
    doc["current-context"] = name
    os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
    tmp = f"{target}.tmp"
    with open(tmp, "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False)
    os.chmod(tmp, 0o600)
    os.replace(tmp, target)
    return target
