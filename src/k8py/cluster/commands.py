"""Each process of a ``k8py up`` cluster as a command line: what the supervisor starts.

:func:`component_specs` turns a :class:`~k8py.cluster.spec.ClusterSpec` and
its fixed ports (:mod:`k8py.cluster.addresses`) into one
:class:`~k8py.cluster.spec.ComponentSpec` per process, control plane first:
the API servers (HTTPS only, Node and RBAC authorization, kubelets reached
over HTTPS), the controller manager (each controller as its own service
account; the cluster CA signs CSRs), the scheduler, each node's containerd
(``runtime: containerd``), one proxy for all nodes (they share this machine's
loopback), a kubelet per node, the simulated kubelet, DNS. Every component
gets its own kubeconfig and certificate from :class:`~k8py.cluster.pki.ClusterPKI`;
a flag the config file's ``components`` gives for a component wins over the
one set here.
"""

from __future__ import annotations

import os
import sys

from k8py.cluster.addresses import DEFAULT_SERVICE_CIDR, DNS_PORT, dns_ip
from k8py.cluster.containerd import ContainerdLayout
from k8py.cluster.pki import FRONT_PROXY_CA, FRONT_PROXY_CLIENT, ClusterPKI
from k8py.cluster.spec import SIMULATED_NODE, ClusterSpec, ComponentSpec, api_server_name, proxy_nftables_table

__all__ = ["component_specs", "zygote_spec"]


def _k8py(*args: str) -> list[str]:
    return [sys.executable, "-m", "k8py", *args]


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
        api_extra = extra.get("apiserver", [])
        if not any(str(a).startswith(("--requestheader-client-ca-file", "--proxy-client-")) for a in api_extra):
            api += ["--requestheader-client-ca-file", pki.cert_file(FRONT_PROXY_CA),
                    "--proxy-client-cert-file", pki.cert_file(FRONT_PROXY_CLIENT),
                    "--proxy-client-key-file", pki.key_file(FRONT_PROXY_CLIENT),
                    "--requestheader-allowed-names", FRONT_PROXY_CLIENT]
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
    if spec.pods_in_netns and not any(str(a).startswith("--proxy-mode") for a in proxy_extra):
        # pods in their own namespaces reach Services only through nft DNAT: said outright, not left to
        # "auto", which would settle on userspace for good if the kubelet were slow to register its Node
        proxy_extra = ["--proxy-mode", "nftables", *proxy_extra]
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
                                                          "--rotate-certificates",  # as kubeadm: renewed by a CSR
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


def zygote_spec(spec: ClusterSpec) -> ComponentSpec:
    """The ``k8py zygote`` process the components are forked from (no health URL:
    it is up once its socket exists)."""
    return ComponentSpec("zygote", _k8py("zygote", "--socket", os.path.join(spec.data_dir, "zygote.sock")),
                         os.path.join(spec.log_dir, "zygote.log"), "")
