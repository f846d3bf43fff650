#!/usr/bin/env python3
"""The outside tools the tests drive (etcd, kubectl, bwrap): found one way, everywhere.

``scripts/test`` runs this file (``python tests/support/tools.py require``)
before the tests, and the tests import it, so both find the binaries by the
same rule: etcd at ``$K8PY_ETCD_BINARY`` or ``/usr/bin/etcd`` (what
``k8py etcd`` runs, ``k8py.cli.etcd.ETCD_BINARY``), kubectl and bwrap (the
kubelet's process runtime isolates containers with it) on ``PATH``.

In CI nothing may be skipped for a missing tool: ``require`` exits non-zero
and the test session refuses to start. CI is recognised however the runner
says so: ``K8PY_CI`` (``.ci/run`` sets it), or any of the variables the
common CI services set (``CI``, ``GITHUB_ACTIONS``, ``GITLAB_CI``,
``BUILDKITE``, ``JENKINS_URL``, ``TF_BUILD``...), unless its value is false.

Standalone on purpose (no k8py import): it runs before the package is
installed.
"""

from __future__ import annotations

import os
import shutil
import sys

__all__ = ["ETCD_MISSING", "KUBECTL_MISSING", "etcd_binary", "etcd_installed", "kubectl_binary", "bwrap_binary", "in_ci", "missing_tools"]

#: the skip reasons for a missing tool (listed in tests/support/skip_policy.py; refused in CI)
ETCD_MISSING = "etcd not installed"
KUBECTL_MISSING = "kubectl not installed"
POD_NETWORK_MISSING = "pod networks need root, the CNI plugins (/usr/lib/cni) and nft"
#: no containerd with CRI GetContainerEvents (the evented-PLEG tests; tests/support/containerd.py looks)
CONTAINERD_NEXT_MISSING = "no containerd 1.7 or later (scripts/containerd-next unpacks Debian's next release's)"
CNI_PLUGINS = ("bridge", "host-local", "loopback", "portmap")

_CI_VARIABLES = (
    "K8PY_CI", "CI", "CONTINUOUS_INTEGRATION", "BUILD_ID", "BUILD_NUMBER", "RUN_ID", "GITHUB_ACTIONS", "GITLAB_CI",
    "BUILDKITE", "CIRCLECI", "TRAVIS", "JENKINS_URL", "TF_BUILD", "TEAMCITY_VERSION", "DRONE", "CODEBUILD_BUILD_ID",
)
_FALSE = ("", "0", "false", "no", "off")


def etcd_binary() -> str:
    return os.environ.get("K8PY_ETCD_BINARY", "/usr/bin/etcd")


def etcd_installed() -> bool:
    path = etcd_binary()
    return os.path.isfile(path) and os.access(path, os.X_OK)


def kubectl_binary() -> str | None:
    return shutil.which("kubectl")


def bwrap_binary() -> str | None:
    return shutil.which("bwrap")


def pod_network_missing() -> str | None:
    """What the pod-network tests (kubelet --pod-network=cni, the nftables proxy) lack, or None."""
    if os.geteuid() != 0:
        return "not root"
    missing = [p for p in CNI_PLUGINS if not os.access(os.path.join("/usr/lib/cni", p), os.X_OK)]
    if missing:
        return f"CNI plugins {missing} not in /usr/lib/cni (Debian's containernetworking-plugins)"
    if shutil.which("nft") is None:
        return "nft not on PATH (Debian's nftables)"
    if shutil.which("conntrack") is None:
        return "conntrack not on PATH (Debian's conntrack; the nftables proxy's UDP flow cleanup)"
    return None


def in_ci(environ: dict[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    return any(env.get(name, "").strip().lower() not in _FALSE for name in _CI_VARIABLES)


#: the image tests' tools: a real registry, the busybox their images are built from, htpasswd for auth,
#: and the walkthrough's image tools
OCI_TOOLS = (("docker-registry", "docker-registry"), ("busybox", "busybox-static"), ("htpasswd", "apache2-utils"),
             ("umoci", "umoci"), ("skopeo", "skopeo"))  # docs/13-images.md builds and pushes with these


def oci_tools_missing() -> list[tuple[str, str]]:
    return [(tool, package) for tool, package in OCI_TOOLS if shutil.which(tool) is None]


def missing_tools() -> list[str]:
    missing = []
    if not etcd_installed():
        missing.append(f"etcd (looked for {etcd_binary()}; set K8PY_ETCD_BINARY or install Debian's etcd-server)")
    if kubectl_binary() is None:
        missing.append("kubectl (not on PATH)")
    if bwrap_binary() is None:
        missing.append("bwrap (not on PATH; install Debian's bubblewrap)")
    missing += [f"{tool} (not on PATH; install Debian's {package})" for tool, package in oci_tools_missing()]
    return missing


def main(argv: list[str]) -> int:
    command = argv[1] if len(argv) > 1 else "require"
    if command == "etcd-missing":
        return 0 if not etcd_installed() else 1
    if command == "bwrap-missing":
        return 0 if bwrap_binary() is None else 1
    if command == "pod-network-missing":  # root without the CNI plugins or nft (non-root machines skip those tests)
        return 0 if os.geteuid() == 0 and pod_network_missing() else 1
    if command == "oci-packages-missing":  # prints the Debian packages to install
        print(" ".join(package for _, package in oci_tools_missing()))
        return 0
    missing = missing_tools()
    if not missing:
        return 0
    if command == "require" and in_ci():
        print("test: CI must run every test, but these are missing: " + "; ".join(missing), file=sys.stderr)
        return 1
    print("test: missing (their tests will be skipped): " + "; ".join(missing), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
