"""A real containerd (tests/support/containerd.py, its sandbox image imported locally) and local registries to pull from."""

from __future__ import annotations

import shutil
import tempfile
from typing import Iterator

import pytest

from tests.support.containerd import Containerd, containerd_missing
from tests.support.oci_registry import Registry

CONTAINERD_MISSING = "containerd tests need root, Debian's containerd and containernetworking-plugins"


@pytest.fixture(scope="module")
def registry(tmp_path_factory) -> Iterator[Registry]:
    missing = containerd_missing()
    if missing:
        pytest.skip(f"{CONTAINERD_MISSING}: {missing}")
    with Registry(str(tmp_path_factory.mktemp("registry"))) as reg:
        yield reg


@pytest.fixture(scope="module")
def auth_registry(registry: Registry, tmp_path_factory) -> Iterator[Registry]:
    if shutil.which("htpasswd") is None:
        pytest.fail("htpasswd is missing: scripts/test installs it (Debian package apache2-utils)")
    with Registry(str(tmp_path_factory.mktemp("auth-registry")), users={"alice": "wonderland"}) as reg:
        yield reg


@pytest.fixture(scope="module")
def containerd(registry: Registry, auth_registry: Registry) -> Iterator[Containerd]:
    # a short path: containerd's socket and the netns paths must fit a unix socket name
    workdir = tempfile.mkdtemp(prefix="k8cri-", dir="/tmp")
    ctrd = Containerd(workdir, registries=[registry.host, auth_registry.host])
    try:
        with ctrd:
            yield ctrd
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
