"""What one ``k8py up`` cluster consists of, and each component's command line.

A :class:`ClusterSpec` comes from the flags of ``k8py up`` over an optional
config file (``--config FILE``, YAML, as kind's cluster config)::

    kind: Cluster
    apiVersion: k8py.io/v1alpha1
    port: 6443                 # 0 picks a free port
    nodes: 1                   # kubelets on the process runtime, one process each
    simulatedNodes: 0          # more nodes on the simulated runtime, in one process
    etcdServers: []            # the control plane on etcd instead of the embedded store
    etcdPrefix: /registry
    apiservers: 1              # more API servers on that etcd (the kubernetes Service lists them all)
    trace: false               # record the list-watch flow (k8py flow)
    proxy: true                # k8py proxy (one: every node shares this machine's loopback)
    dns: true                  # k8py dns (on the service range's 10th address, port 53 when free)
    podNetwork: loopback       # cni (root): each pod its own network namespace, Services through nftables
    runtime: process           # containerd (root): each node's pods on its own Debian containerd, over CRI
    containerRuntimeEndpoint: ""  # unix:///…/containerd.sock: the nodes' pods on a containerd already running
    zygote: true               # fork components from one process that imported k8py once
    components:                # extra arguments, per component
      apiserver: ["--watch-cache-size", "20000"]
      controller-manager: ["--controllers", "*,-cronjob"]
      scheduler: ["--config", "sched.yaml"]
      kubelet: ["--max-pods", "50"]

Flags given on the command line win over the file. Security: every
component talks HTTPS to the API server with its own client certificate and
kubeconfig from :class:`~k8py.cluster.pki.ClusterPKI` (``DATA_DIR/pki``,
``DATA_DIR/kubeconfigs``); the API server has no insecure port, and reaches
the kubelets over HTTPS with its kubelet-client certificate. Ports: the supervisor
fixes every port once (a free one where none is asked for) so that a
restarted component comes back where the others expect it
(:mod:`k8py.cluster.addresses`, with the pod and Service ranges); each
component's command line is :mod:`k8py.cluster.commands`.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from typing import Any

import yaml

__all__ = ["ClusterSpec", "ComponentSpec", "SpecError", "load_config_file", "api_server_name", "proxy_nftables_table",
           "SIMULATED_NODE"]

CONFIG_KEYS = {"kind", "apiVersion", "port", "bind", "nodes", "simulatedNodes", "etcdServers", "etcdPrefix", "trace", "apiservers", "proxy", "dns",
               "zygote", "components", "podNetwork", "runtime", "containerRuntimeEndpoint"}
COMPONENTS = ("apiserver", "controller-manager", "scheduler", "kubelet", "proxy", "dns", "containerd")
#: the simulated kubelet's node-name prefix, and the one identity its nodes share (system:node:k8py-sim)
SIMULATED_NODE = "k8py-sim"


class SpecError(ValueError):
    """A config file or flag combination that cannot make a cluster; the message says what to fix."""


@dataclass
class ClusterSpec:
    data_dir: str
    bind: str = "127.0.0.1"
    port: int = 6443
    nodes: int = 1
    simulated_nodes: int = 0
    etcd_servers: list[str] = field(default_factory=list)
    etcd_prefix: str = "/registry"
    trace: bool = False
    #: API servers (more than one needs etcd: they share the store)
    apiservers: int = 1
    proxy: bool = True
    dns: bool = True
    #: fork the components from ``k8py zygote`` (faster start, shared memory) instead of
    #: starting an interpreter for each
    zygote: bool = True
    #: "loopback" (pods share the host network on 127.x IPs) or "cni" (a network namespace per pod, root)
    pod_network: str = "loopback"
    #: "process" (k8py's process runtime) or "containerd" (one supervised containerd per node, root)
    runtime: str = "process"
    #: with runtime "containerd": a containerd already running (no containerd component); its CNI config is its own
    container_runtime_endpoint: str = ""
    extra_args: dict[str, list[str]] = field(default_factory=dict)

    @property
    def pods_in_netns(self) -> bool:
        """Pods in their own network namespaces (CNI bridge): routable pod and Service ranges, not loopback."""
        return self.pod_network == "cni" or self.runtime == "containerd"

    @property
    def runs_containerd(self) -> bool:
        """k8py up starts and supervises a containerd per node."""
        return self.runtime == "containerd" and not self.container_runtime_endpoint

    @property
    def kubeconfig(self) -> str:
        return os.path.join(self.data_dir, "kubeconfig")

    @property
    def log_dir(self) -> str:
        return os.path.join(self.data_dir, "logs")

    @property
    def expected_nodes(self) -> int:
        return self.nodes + self.simulated_nodes

    def node_names(self) -> list[str]:
        return [f"k8py-node-{i}" for i in range(self.nodes)]

    def certificate_nodes(self) -> list[str]:
        """The nodes with a kubelet identity and serving certificate (the simulated process has one)."""
        return self.node_names() + ([SIMULATED_NODE] if self.simulated_nodes else [])


@dataclass
class ComponentSpec:
    """One supervised process. ``health`` is the URL whose 200 says it is up."""

    name: str
    argv: list[str]
    log: str
    health: str
    control_plane: bool = False
    #: started with the API server rather than after it, and healthy before the kubelets start (a node's runtime)
    early: bool = False


def load_config_file(path: str) -> dict[str, Any]:
    try:
        with open(path) as f:
            doc = yaml.safe_load(f) or {}
    except OSError as err:
        raise SpecError(f"cannot read the config file {path}: {err.strerror or err}") from err
    except yaml.YAMLError as err:
        raise SpecError(f"the config file {path} is not valid YAML: {err}") from err
    if not isinstance(doc, dict):
        raise SpecError(f"the config file {path} must be a mapping (kind: Cluster, nodes: …)")
    unknown = set(doc) - CONFIG_KEYS
    if unknown:
        raise SpecError(f"the config file {path} has unknown fields {sorted(unknown)}; known: {sorted(CONFIG_KEYS)}")
    if doc.get("kind", "Cluster") != "Cluster":
        raise SpecError(f"the config file {path} has kind {doc['kind']!r}; it must be 'Cluster'")
    components = doc.get("components") or {}
    if not isinstance(components, dict) or set(components) - set(COMPONENTS):
        raise SpecError(f"components in {path} must map some of {list(COMPONENTS)} to argument lists")
    for name, args in components.items():
        if not isinstance(args, list) or not all(isinstance(a, (str, int, float)) for a in args):
            raise SpecError(f"components.{name} in {path} must be a list of arguments, e.g. [\"--max-pods\", \"50\"]")
    return doc


def api_server_name(index: int) -> str:
    """``apiserver`` for the first (the kubeconfig's), ``apiserver-1``… for the others."""
    return "apiserver" if index == 0 else f"apiserver-{index}"


def proxy_nftables_table(data_dir: str, node: str) -> str:
    """The nftables proxy's table for ``node`` of the cluster in ``data_dir``:
    ``k8py-<node>-<tag>``, since every cluster's first node is ``k8py-node-0``
    and two clusters on one machine must not rewrite each other's rules."""
    tag = hashlib.sha1(os.path.realpath(data_dir).encode()).hexdigest()[:6]
    return f"k8py-{node}-{tag}"[:64]
