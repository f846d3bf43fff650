"""Loading a kubeconfig the way kubectl does, into a :class:`ClientConfig`.

Loading rules (client-go ``clientcmd``):

- the files are ``$KUBECONFIG`` split on ``os.pathsep`` (``:``) with empty
  entries and missing files skipped, or else ``~/.kube/config``;
- files are merged: for clusters, users and contexts, the *first* file that
  defines a name wins; ``current-context`` is the first non-empty one;
- relative paths in a file (``certificate-authority``, ``client-certificate``,
  ``client-key``, ``tokenFile``) are resolved against that file's directory;
- ``*-data`` fields are base64 PEM and take precedence over their file form;
- the context's ``namespace`` (or ``default``) is the default namespace.

``context=`` and ``namespace=`` override the file, as kubectl's
``--context`` and ``--namespace`` do.
"""

from __future__ import annotations

import base64
import os
from typing import Any, Mapping

import yaml  # type: ignore[import-untyped]

from k8py.client.config import ClientConfig, ConfigError

__all__ = ["load_kubeconfig", "kubeconfig_paths", "merge_kubeconfigs"]


def kubeconfig_paths(environ: Mapping[str, str] | None = None) -> list[str]:
    """The files kubectl would read, in precedence order (existing ones only)."""
    env = os.environ if environ is None else environ
    value = env.get("KUBECONFIG", "")
    if value:
        return [p for p in value.split(os.pathsep) if p and os.path.exists(p)]
    default = os.path.join(env.get("HOME") or os.path.expanduser("~"), ".kube", "config")
    return [default] if os.path.exists(default) else []


def _resolve_paths(entry: dict[str, Any], base: str, keys: tuple[str, ...]) -> dict[str, Any]:
    out = dict(entry)
    for key in keys:
        value = out.get(key)
        if isinstance(value, str) and value and not os.path.isabs(value):
            out[key] = os.path.normpath(os.path.join(base, os.path.expanduser(value)))
    return out


def merge_kubeconfigs(paths: list[str]) -> dict[str, Any]:
    """The merged document: ``clusters``/``users``/``contexts`` as name→entry dicts."""
    merged: dict[str, Any] = {"clusters": {}, "users": {}, "contexts": {}, "current-context": ""}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f) or {}
        if not isinstance(doc, dict):
            raise ConfigError(f"{path}: not a kubeconfig mapping")
        base = os.path.dirname(os.path.abspath(path))
        if not merged["current-context"] and doc.get("current-context"):
            merged["current-context"] = doc["current-context"]
        for section, inner, path_keys in (
            ("clusters", "cluster", ("certificate-authority",)),
            ("users", "user", ("client-certificate", "client-key", "tokenFile")),
            ("contexts", "context", ()),
        ):
            for item in doc.get(section) or ():
                name = item.get("name")
                if not name or name in merged[section]:
                    continue  # the first file to define a name wins
                merged[section][name] = _resolve_paths(item.get(inner) or {}, base, path_keys)
    return merged


def _b64(value: Any) -> bytes | None:
    if not value:
        return None
    try:
        return base64.b64decode(value)
    except ValueError as err:
        raise ConfigError(f"invalid base64 data in kubeconfig: {err}") from err


def load_kubeconfig(
    path: str | list[str] | None = None,
    *,
    context: str | None = None,
    namespace: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> ClientConfig:
    """Resolve a kubeconfig (``path``, or kubectl's search) into a :class:`ClientConfig`."""
    if path is None:
        paths = kubeconfig_paths(environ)
        if not paths:
            raise ConfigError("no kubeconfig found: set KUBECONFIG or create ~/.kube/config")
    else:
        paths = [path] if isinstance(path, str) else list(path)
    merged = merge_kubeconfigs(paths)
    context_name = context or merged["current-context"]
    if not context_name:
        raise ConfigError("kubeconfig has no current-context and none was given")
    ctx = merged["contexts"].get(context_name)
    if ctx is None:
        raise ConfigError(f"context {context_name!r} not found in kubeconfig")
    cluster = merged["clusters"].get(ctx.get("cluster", ""))
    if cluster is None:
        raise ConfigError(f"cluster {ctx.get('cluster')!r} of context {context_name!r} not found")
    user = merged["users"].get(ctx.get("user", ""), {}) if ctx.get("user") else {}
    server = cluster.get("server")
    if not server:
        raise ConfigError(f"cluster {ctx.get('cluster')!r} has no server")
    return ClientConfig(
        server=server,
        namespace=namespace or ctx.get("namespace") or "default",
        ca_file=cluster.get("certificate-authority"),
        ca_data=_b64(cluster.get("certificate-authority-data")),
        insecure_skip_tls_verify=bool(cluster.get("insecure-skip-tls-verify", False)),
        tls_server_name=cluster.get("tls-server-name"),
        cert_file=user.get("client-certificate"),
        cert_data=_b64(user.get("client-certificate-data")),
        key_file=user.get("client-key"),
        key_data=_b64(user.get("client-key-data")),
        token=user.get("token"),
        token_file=user.get("tokenFile"),
        username=user.get("username"),
        password=user.get("password"),
    )
