"""The credentials a pod's image pull tries: its ``imagePullSecrets``, then the node's.

As upstream's kubelet does: each secret named in ``spec.imagePullSecrets``
(in the pod's namespace, of type ``kubernetes.io/dockerconfigjson`` or
``kubernetes.io/dockercfg``) adds the entries matching the image's
registry, in order; then the node's Docker ``config.json`` (the kubelet's
``--root-dir``/config.json, else ``~/.docker/config.json``, or the file
``--image-credentials`` names). A named secret that does not exist is
reported (Event ``FailedToRetrieveImagePullSecret``) and the pull goes on
without it. Images the catalog serves need no credentials.
"""

from __future__ import annotations

import os
from typing import Any, Awaitable, Callable, Mapping

from k8py.kubelet.images import reference
from k8py.kubelet.images.credentials import Keyring, keyring_from_file, keyring_from_secret
from k8py.kubelet.runtime.protocols import AuthConfig, RuntimeErrorStatus

__all__ = ["credentials_for", "node_credential_paths"]


def node_credential_paths(root_dir: str, explicit: str = "") -> list[str]:
    if explicit:
        return [explicit]
    return [os.path.join(root_dir, "config.json"), os.path.join(os.path.expanduser("~"), ".docker", "config.json")]


async def credentials_for(pod: Mapping[str, Any], image: str, *, get_object: Callable[[str, str, str], Awaitable[Any]],
                          node_paths: list[str]) -> tuple[list[AuthConfig], list[str]]:
    """(credentials to try in order, names of pull secrets that could not be read)."""
    try:
        ref = reference.parse(image)
    except RuntimeErrorStatus:
        return [], []
    ns = (pod.get("metadata") or {}).get("namespace", "default")
    keyring, missing = Keyring(), []
    for item in (pod.get("spec") or {}).get("imagePullSecrets") or []:
        name = (item or {}).get("name")
        if not name:
            continue
        secret = await get_object("secret", ns, name)
        if secret is None:
            missing.append(name)
            continue
        secret.setdefault("metadata", {}).setdefault("namespace", ns)
        secret["metadata"].setdefault("name", name)
        keyring = keyring + keyring_from_secret(secret)
    pod_creds = keyring.lookup(ref)
    node_creds = [c for c in keyring_from_file(node_paths).lookup(ref) if c not in pod_creds]
    return [*pod_creds, *node_creds], missing
