"""Writing a kubeconfig that points kubectl (and any client) at a k8py server, and merging a k8py context into the user's."""

from __future__ import annotations

import base64
import os

import yaml

__all__ = ["write_kubeconfig", "kubeconfig_document", "merge_into_user_kubeconfig"]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def kubeconfig_document(server_url: str, *, name: str = "k8py", ca_data: bytes | None = None,
                        client_cert_data: bytes | None = None, client_key_data: bytes | None = None,
                        token: str | None = None) -> dict:
    """One cluster, user and context; PEM given as bytes is embedded as ``*-data``."""
    cluster: dict = {"server": server_url}
    if ca_data:
        cluster["certificate-authority-data"] = _b64(ca_data)
    user: dict = {}
    if client_cert_data:
        user["client-certificate-data"] = _b64(client_cert_data)
    if client_key_data:
        user["client-key-data"] = _b64(client_key_data)
    if token:
        user["token"] = token
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}],
        "current-context": name,
        "preferences": {},
    }


def write_kubeconfig(path: str, server_url: str, *, name: str = "k8py", **credentials: bytes | str | None) -> str:
    """Write (atomically, mode 0600: it may hold a key) and return the path.

    ``credentials`` are :func:`kubeconfig_document`'s ``ca_data``,
    ``client_cert_data``, ``client_key_data`` and ``token``."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        yaml.safe_dump(kubeconfig_document(server_url, name=name, **credentials), f, sort_keys=False)  # type: ignore[arg-type]
    os.chmod(tmp, 0o600)
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
