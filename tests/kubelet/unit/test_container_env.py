"""A container's environment from ConfigMaps and Secrets: optional and required sources (build_env is pure;
the getter stands in for the kubelet's object cache, a dict of the objects the API server would return)."""

import asyncio
import base64
from typing import Any

import pytest

from k8py.kubelet.container_env import ConfigError, build_env

OBJECTS = {
    ("configmap", "ns", "cfg"): {"data": {"greeting": "hi"}},
    ("secret", "ns", "creds"): {"data": {"password": base64.b64encode(b"s3cret").decode()}},
}


async def _get(kind: str, ns: str, name: str) -> dict[str, Any] | None:
    return OBJECTS.get((kind, ns, name))


def _env(container: dict[str, Any]) -> dict[str, str]:
    pod = {"metadata": {"namespace": "ns", "name": "p"}, "spec": {"enableServiceLinks": False, "containers": [container]}}
    return asyncio.run(build_env(pod, container, get=_get, services=[], pod_ip="10.0.0.1", host_ip="127.0.0.1", node_alloc={}))


def test_env_from_reads_configmaps_and_decodes_secrets_and_skips_an_absent_optional_source() -> None:
    env = _env({"name": "c", "envFrom": [{"configMapRef": {"name": "cfg"}, "prefix": "CM_"},
                                         {"secretRef": {"name": "creds"}},
                                         {"configMapRef": {"name": "absent", "optional": True}}]})
    assert env == {"CM_greeting": "hi", "password": "s3cret"}


def test_key_refs_resolve_and_an_absent_optional_source_or_key_leaves_the_variable_unset() -> None:
    env = _env({"name": "c", "env": [
        {"name": "G", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "greeting"}}},
        {"name": "P", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
        {"name": "NO_SOURCE", "valueFrom": {"configMapKeyRef": {"name": "absent", "key": "k", "optional": True}}},
        {"name": "NO_KEY", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "nope", "optional": True}}},
    ]})
    assert env == {"G": "hi", "P": "s3cret"}


def test_an_absent_required_source_or_key_is_a_config_error_naming_it() -> None:
    with pytest.raises(ConfigError, match='configmap "absent" not found'):
        _env({"name": "c", "envFrom": [{"configMapRef": {"name": "absent"}}]})
    with pytest.raises(ConfigError, match='secret "absent" not found'):
        _env({"name": "c", "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "k"}}}]})
    with pytest.raises(ConfigError, match="couldn't find key nope in ConfigMap ns/cfg"):
        _env({"name": "c", "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "nope"}}}]})
