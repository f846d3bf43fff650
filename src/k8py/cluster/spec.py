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
restarted component comes back where the others expect it.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import random
import socket
import sys
from dataclasses import dataclass, field
from typing import Any

import yaml

from k8py.cluster.containerd import ContainerdLayout
from k8py.cluster.pki import ClusterPKI

__all__ = ["ClusterSpec", "ComponentSpec", "SpecError", "load_config_file", "free_port", "component_specs", "all_ports",
           "pick_cluster_cidr", "pick_service_cidr", "service_cidr_for", "dns_ip", "kubernetes_service_ip",
           "zygote_spec", "proxy_nftables_table"]

CONFIG_KEYS = {"kind", "apiVersion", "port", "bind", "nodes", "simulatedNodes", "etcdServers", "etcdPrefix", "trace", "apiservers", "proxy", "dns",
               "zygote", "components", "podNetwork", "runtime", "containerRuntimeEndpoint"}
#: the API server's own default Service range, and DNS' port
DEFAULT_SERVICE_CIDR, DNS_PORT = "127.192.0.0/12", 53
COMPONENTS = ("apiserver", "controller-manager", "scheduler", "kubelet", "proxy", "dns", "containerd")


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


def free_port(bind: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((bind, 0))
        return int(s.getsockname()[1])


def _k8py(*args: str) -> list[str]:
    return [sys.executable, "-m", "k8py", *args]


def api_server_name(index: int) -> str:
    """``apiserver`` for the first (the kubeconfig's), ``apiserver-1``… for the others."""
    return "apiserver" if index == 0 else f"apiserver-{index}"


def proxy_nftables_table(data_dir: str, node: str) -> str:
    """The nftables proxy's table for ``node`` of the cluster in ``data_dir``:
    ``k8py-<node>-<tag>``, since every cluster's first node is ``k8py-node-0``
    and two clusters on one machine must not rewrite each other's rules."""
    tag = hashlib.sha1(os.path.realpath(data_dir).encode()).hexdigest()[:6]
    return f"k8py-{node}-{tag}"[:64]


def pick_cluster_cidr(spec: ClusterSpec, rng: random.Random | None = None) -> str:
    """The pod range of a new cluster: a random /16 of 127.64.0.0/10 (256
    nodes of /24), so that two clusters on one machine (parallel test
    sessions) rarely hand out the same pod IPs, whose ports would collide;
    the whole /10 when the cluster has more nodes than a /16 holds."""
    if spec.pods_in_netns:
        # pods on bridges need routable addresses: a random 10.x.0.0/17 (the /24 above it is the Service range)
        return f"10.{100 + (rng or random.Random()).randrange(150)}.0.0/17"
    if spec.expected_nodes > 250:
        return "127.64.0.0/10"
    return f"127.{64 + (rng or random.Random()).randrange(64)}.0.0/16"


def service_cidr_for(cluster_cidr: str) -> str:
    """With ``podNetwork: cni``: the Service range beside the pod range ``10.x.0.0/17``: ``10.x.128.0/24``
    (not loopback: pods in their own namespaces cannot reach the host's 127.x)."""
    a = cluster_cidr.split(".")[1]
    return f"10.{a}.128.0/24"


#: the Service ranges k8py up picks from: the /20s of 127.192.0.0/12, the API server's default range
SERVICE_BLOCKS, SERVICE_PREFIX = ipaddress.ip_network("127.192.0.0/12"), 20


def dns_ip(service_cidr: str) -> str:
    """Where k8py dns answers: the kube-dns Service's cluster IP, the range's 10th address
    as kubeadm places it. On a loopback range every pod shares it with the host; with pods
    in their own namespaces (a 10.x range) :mod:`k8py.cluster.dns_address` makes it local
    to the host on a link of the cluster's own, which pods reach through their gateway."""
    return str(ipaddress.ip_network(service_cidr)[10])


def kubernetes_service_ip(service_cidr: str) -> str:
    """The ``kubernetes`` Service's ClusterIP (named in the API server's certificate): the range's first address."""
    return str(ipaddress.ip_network(service_cidr, strict=False)[1])


def pick_service_cidr(spec: ClusterSpec, rng: random.Random | None = None) -> str:
    """The Service range of a new cluster: a random /20 of 127.192.0.0/12 whose
    DNS address (port 53) and ``kubernetes`` Service address (port 443) are free
    now, so that two clusters on one machine do not fight over the same cluster
    IPs (their proxies and DNS servers bind them on this machine's loopback).
    A range given to the API server in the config file wins."""
    given = [str(a) for a in spec.extra_args.get("apiserver", [])]
    for i, arg in enumerate(given):
        if arg == "--service-cluster-ip-range" and i + 1 < len(given):
            return given[i + 1]
        if arg.startswith("--service-cluster-ip-range="):
            return arg.split("=", 1)[1]
    rng = rng or random.Random()
    blocks = list(SERVICE_BLOCKS.subnets(new_prefix=SERVICE_PREFIX))
    choice = blocks[0]
    for choice in rng.sample(blocks, 32):
        if (not spec.dns or _udp_bindable(dns_ip(str(choice)), DNS_PORT)) and _bindable(str(choice[1]), 443):
            break
    return str(choice)


def component_specs(spec: ClusterSpec, ports: dict[str, int], *, cluster_cidr: str = "",
                    service_cidr: str = DEFAULT_SERVICE_CIDR) -> list[ComponentSpec]:
    """Every process of the cluster, control plane first. ``ports`` maps
    component names to their fixed ports (see the module docstring);
    ``cluster_cidr`` is the controller manager's pod range, ``service_cidr``
    the API server's Service range (its 10th address is k8py dns')."""
    extra = spec.extra_args
    pki = ClusterPKI(spec.data_dir)
    kc = pki.kubeconfig
    log = lambda name: os.path.join(spec.log_dir, f"{name}.log")  # noqa: E731
    health = lambda port: f"http://127.0.0.1:{port}/healthz"  # noqa: E731
    host = "127.0.0.1" if spec.bind in ("0.0.0.0", "::") else spec.bind
    out = []
    for i in range(spec.apiservers):
        name = api_server_name(i)
        # k8py up writes every kubeconfig itself (ClusterPKI), so the API servers write none
        api = _k8py("apiserver", "--data-dir", spec.data_dir, "--bind-address", spec.bind, "--secure-port", str(ports[name]),
                    "--no-kubeconfig",
                    "--tls-cert-file", pki.cert_file("apiserver"), "--tls-private-key-file", pki.key_file("apiserver"),
                    "--client-ca-file", pki.ca_file,
                    "--kubelet-client-certificate", pki.cert_file("apiserver-kubelet-client"),
                    "--kubelet-client-key", pki.key_file("apiserver-kubelet-client"),
                    "--kubelet-certificate-authority", pki.ca_file)
        if spec.etcd_servers:
            api += ["--etcd-servers", ",".join(spec.etcd_servers), "--etcd-prefix", spec.etcd_prefix]
        if spec.trace:
            api += ["--trace"]
        api_extra = extra.get("apiserver", [])
        if not any(str(a).startswith("--service-cluster-ip-range") for a in api_extra):
            api += ["--service-cluster-ip-range", service_cidr]
        plugins = ["TaintNodesByCondition"]  # the controller manager's node lifecycle controller lifts the not-ready taint
        if not any(a.startswith("--authorization-mode") for a in api_extra):
            # as kubeadm and k3s run it: every component with only what upstream grants its identity
            api += ["--authorization-mode", "Node,RBAC"]
            plugins.append("NodeRestriction")
        if not any(a.startswith("--enable-admission-plugins") for a in api_extra):
            api += ["--enable-admission-plugins", ",".join(plugins)]
        out.append(ComponentSpec(name, api + api_extra, log(name), f"https://{host}:{ports[name]}/readyz",
                                 control_plane=True))
    cm_extra = extra.get("controller-manager", [])
    cm_flags = ["--cluster-cidr", cluster_cidr] if cluster_cidr and "--cluster-cidr" not in cm_extra else []
    # each controller as its own service account, which the bootstrap policy's system:controller:* roles authorize
    cm_flags += ["--use-service-account-credentials"] if "--use-service-account-credentials" not in cm_extra else []
    # the cluster CA signs approved CSRs and is what pods trust (kube-root-ca.crt, token Secrets);
    # legacy tokens are signed with the key the API server verifies (DATA_DIR/service-account.key)
    for flag, value in (("--root-ca-file", pki.ca_file), ("--cluster-signing-cert-file", pki.ca_file),
                        ("--cluster-signing-key-file", pki.key_file("ca")),
                        ("--service-account-private-key-file", os.path.join(spec.data_dir, "service-account.key"))):
        if flag not in cm_extra:
            cm_flags += [flag, value]
    out.append(ComponentSpec("controller-manager", _k8py("controller-manager", "--kubeconfig", kc("controller-manager"), "--port", str(ports["controller-manager"]),
                                                         *cm_flags, *cm_extra),
                             log("controller-manager"), health(ports["controller-manager"]), control_plane=True))
    out.append(ComponentSpec("scheduler", _k8py("scheduler", "--kubeconfig", kc("scheduler"), "--port", str(ports["scheduler"]), *extra.get("scheduler", [])),
                             log("scheduler"), health(ports["scheduler"]), control_plane=True))
    # pods' resolv.conf can name only an address (port 53 implied): point
    # ClusterFirst pods at k8py dns only when it got port 53 on its address
    kubelet_extra = extra.get("kubelet", [])
    dns = ["--cluster-dns", dns_ip(service_cidr)] if spec.dns and ports.get("dns/udp") == DNS_PORT and "--cluster-dns" not in kubelet_extra else []
    if spec.pod_network == "cni":
        dns += ["--pod-network", "cni", "--service-cluster-ip-range", service_cidr]
    proxy_extra = extra.get("proxy", [])
    if spec.runtime == "containerd" and not any(str(a).startswith("--proxy-mode") for a in proxy_extra):
        proxy_extra = ["--proxy-mode", "nftables", *proxy_extra]  # pods in their own namespaces reach Services through nft DNAT
    for node in spec.node_names():
        port = ports[f"kubelet/{node}"]
        runtime: list[str] = []
        if spec.runtime == "containerd":
            layout = ContainerdLayout.for_node(spec.data_dir, node)
            runtime = ["--container-runtime-endpoint", spec.container_runtime_endpoint or layout.endpoint,
                       "--cgroup-root", layout.cgroup_parent]
        if spec.runs_containerd:
            name = f"containerd/{node}"
            out.append(ComponentSpec(name, _k8py("containerd", "--data-dir", spec.data_dir, "--node-name", node, "--port", str(ports[name]),
                                                 "--service-cluster-ip-range", service_cidr, *extra.get("containerd", [])),
                                     log(f"containerd-{node}"), health(ports[name]), early=True))
        if spec.proxy and node == spec.node_names()[0]:
            # one proxy for all: the nodes share this machine's loopback, so
            # a second proxy could only fight the first over the same addresses
            out.append(ComponentSpec("proxy", _k8py("proxy", "--kubeconfig", kc("proxy"), "--node-name", node, "--port", str(ports["proxy"]),
                                                    "--nftables-table", proxy_nftables_table(spec.data_dir, node), *proxy_extra),
                                     log("proxy"), health(ports["proxy"])))
        serving = pki.kubelet_name(node)
        tls = ["--tls-cert-file", pki.cert_file(serving), "--tls-private-key-file", pki.key_file(serving), "--client-ca-file", pki.ca_file]
        out.append(ComponentSpec(f"kubelet/{node}", _k8py("kubelet", "--kubeconfig", kc(f"node-{node}"), "--node-name", node, "--port", str(port), *tls,
                                                          "--root-dir", os.path.join(spec.data_dir, "kubelet", node),
                                                          "--pod-cidr-wait", "30", *dns, *runtime, *kubelet_extra),
                                 log(f"kubelet-{node}"), f"https://127.0.0.1:{port}/healthz"))
    if spec.simulated_nodes:
        port = ports["kubelet/simulated"]
        serving = pki.kubelet_name(SIMULATED_NODE)
        tls = ["--tls-cert-file", pki.cert_file(serving), "--tls-private-key-file", pki.key_file(serving), "--client-ca-file", pki.ca_file]
        out.append(ComponentSpec("kubelet/simulated", _k8py("kubelet", "--kubeconfig", kc(f"node-{SIMULATED_NODE}"), "--simulated", "--nodes", str(spec.simulated_nodes), *tls,
                                                            "--node-name", SIMULATED_NODE, "--port", str(port),
                                                            "--root-dir", os.path.join(spec.data_dir, "kubelet", "simulated"),
                                                            *extra.get("kubelet", [])),
                                 log("kubelet-simulated"), f"https://127.0.0.1:{port}/healthz"))
    if spec.dns:
        out.append(ComponentSpec("dns", _k8py("dns", "--kubeconfig", kc("dns"), "--bind", dns_ip(service_cidr),
                                              "--dns-port", str(ports["dns/udp"]), "--port", str(ports["dns"]),
                                              *extra.get("dns", [])), log("dns"), health(ports["dns"])))
    return out


def all_ports(spec: ClusterSpec, previous: dict[str, int] | None = None, *,
              service_cidr: str = DEFAULT_SERVICE_CIDR) -> dict[str, int]:
    """Fixed ports for every component: the API server's from the spec (a free
    one for 0), the others' reused from ``previous`` (a resumed cluster) or free;
    DNS on port 53 of the Service range's DNS address when that is free."""
    previous = previous or {}
    reuse = lambda name, bind="127.0.0.1": previous.get(name) if previous.get(name) and _bindable(bind, previous[name]) else free_port(bind)  # noqa: E731
    ports = {"apiserver": spec.port or reuse("apiserver", spec.bind)}
    names = [*(api_server_name(i) for i in range(1, spec.apiservers)), "controller-manager", "scheduler",
             *(f"kubelet/{n}" for n in spec.node_names()),
             *(f"containerd/{n}" for n in spec.node_names() if spec.runs_containerd)]
    if spec.simulated_nodes:
        names.append("kubelet/simulated")
    if spec.proxy and spec.nodes:
        names.append("proxy")
    if spec.dns:
        names.append("dns")
        ip = dns_ip(service_cidr)
        if spec.pods_in_netns:
            ports["dns/udp"] = DNS_PORT  # on an address of the cluster's own (k8py.cluster.dns_address): always free
        else:
            ports["dns/udp"] = DNS_PORT if _udp_bindable(ip, DNS_PORT) else (previous.get("dns/udp") or _free_udp_port(ip))
    for name in names:
        ports[name] = reuse(name)
    return ports


#: the simulated kubelet's node-name prefix, and the one identity its nodes share (system:node:k8py-sim)
SIMULATED_NODE = "k8py-sim"


def _udp_bindable(bind: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.bind((bind, port))
        except OSError:
            return False
    return True


def _free_udp_port(bind: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((bind, 0))
        return int(s.getsockname()[1])


def _bindable(bind: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((bind, port))
        except OSError:
            return False
    return True


def zygote_spec(spec: ClusterSpec) -> ComponentSpec:
    """The ``k8py zygote`` process the components are forked from (no health URL:
    it is up once its socket exists)."""
    return ComponentSpec("zygote", _k8py("zygote", "--socket", os.path.join(spec.data_dir, "zygote.sock")),
                         os.path.join(spec.log_dir, "zygote.log"), "")
