"""Registry credentials: pull secrets and the node's ``config.json``.

Both use Docker's config format: ``{"auths": {"<registry>": {"auth":
base64("user:pass")} | {"username": ..., "password": ...}}}``; a
``kubernetes.io/dockercfg`` secret holds the inner map alone. A key matches
an image the way the kubelet's keyring does: its host (scheme and a
trailing path stripped; ``index.docker.io``/``registry-1.docker.io`` are
Docker Hub) equals the reference's domain, and its path, if any, is a
prefix of the repository path. More specific keys come first.

Order of the credentials tried for one pull, as upstream: the pod's
``imagePullSecrets`` in the order listed, then the node's credentials;
with none matching, the pull is anonymous.
"""

from __future__ import annotations

import base64
import json
import logging
import os
from typing import Any, Iterable, Mapping, Sequence

from k8py.kubelet.images.reference import Reference
from k8py.kubelet.runtime.protocols import AuthConfig

__all__ = ["Credential", "Keyring", "keyring_from_secret", "keyring_from_file"]

logger = logging.getLogger(__name__)

_HUB_ALIASES = {"index.docker.io": "docker.io", "registry-1.docker.io": "docker.io", "registry.hub.docker.com": "docker.io"}


#: a credential is the runtime protocol's AuthConfig (username, password, source)
Credential = AuthConfig


def _split_key(key: str) -> tuple[str, str]:
    k = key.strip()
    for prefix in ("https://", "http://"):
        if k.startswith(prefix):
            k = k[len(prefix):]
    host, _, path = k.partition("/")
    host = _HUB_ALIASES.get(host.lower(), host.lower())
    path = path.strip("/")
    if path in ("v1", "v2"):
        path = ""
    return host, path


def _decode(entry: Mapping[str, Any]) -> tuple[str, str] | None:
    if entry.get("auth"):
        try:
            user, _, password = base64.b64decode(str(entry["auth"])).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return None
        return user, password
    if entry.get("username"):
        return str(entry["username"]), str(entry.get("password", ""))
    return None


class Keyring:
    def __init__(self, entries: Iterable[tuple[str, str, Credential]] = ()) -> None:
        #: (host, path prefix, credential), in the order given
        self.entries = list(entries)

    @classmethod
    def from_auths(cls, auths: Mapping[str, Any], source: str) -> "Keyring":
        entries = []
        for key, entry in auths.items():
            if not isinstance(entry, Mapping):
                continue
            pair = _decode(entry)
            if pair is None:
                continue
            host, path = _split_key(key)
            entries.append((host, path, Credential(pair[0], pair[1], source)))
        return cls(entries)

    def __add__(self, other: "Keyring") -> "Keyring":
        return Keyring([*self.entries, *other.entries])

    def lookup(self, ref: Reference) -> list[Credential]:
        domain = _HUB_ALIASES.get(ref.domain.lower(), ref.domain.lower())
        hits = [(len(path), i, cred) for i, (host, path, cred) in enumerate(self.entries)
                if host == domain and (not path or ref.path == path or ref.path.startswith(path + "/"))]
        hits.sort(key=lambda h: (-h[0], h[1]))  # most specific first, then as listed
        out: list[Credential] = []
        for _, _, cred in hits:
            if cred not in out:
                out.append(cred)
        return out


def keyring_from_secret(secret: Mapping[str, Any]) -> Keyring:
    """The credentials in a ``kubernetes.io/dockerconfigjson`` or ``dockercfg`` Secret (empty if neither)."""
    meta = secret.get("metadata") or {}
    source = f"secret {meta.get('namespace', '')}/{meta.get('name', '')}"
    data = secret.get("data") or {}
    kind = secret.get("type", "")
    key = ".dockerconfigjson" if kind == "kubernetes.io/dockerconfigjson" else ".dockercfg" if kind == "kubernetes.io/dockercfg" else ""
    if not key or key not in data:
        return Keyring()
    try:
        doc = json.loads(base64.b64decode(data[key]))
    except ValueError:
        logger.warning("unreadable pull secret", extra={"secret": source})
        return Keyring()
    auths = doc.get("auths", {}) if key == ".dockerconfigjson" else doc
    return Keyring.from_auths(auths if isinstance(auths, Mapping) else {}, source)


def keyring_from_file(paths: Sequence[str]) -> Keyring:
    """The node's credentials: the first of ``paths`` that exists (Docker ``config.json`` format)."""
    for path in paths:
        if not path or not os.path.isfile(path):
            continue
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, ValueError) as err:
            logger.warning("unreadable node credentials", extra={"path": path, "error": str(err)})
            return Keyring()
        return Keyring.from_auths(doc.get("auths") or {}, f"node {path}")
    return Keyring()
