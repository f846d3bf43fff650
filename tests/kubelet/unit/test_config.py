"""Flags and a KubeletConfiguration file become one KubeletConfig (flags given explicitly win)."""

from __future__ import annotations

import argparse

import pytest

from k8py.cli import kubelet as kubelet_cli
from k8py.kubelet.config import KubeletConfig, load_kubelet_configuration, parse_quantity_bytes
from k8py.kubelet.node_status import HostReadings, build_node, node_conditions


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    kubelet_cli.add_parser(sub)
    return parser.parse_args(["kubelet", "--kubeconfig", "kc", *argv])


def test_a_configuration_file_is_read_and_explicit_flags_win(tmp_path) -> None:
    path = tmp_path / "kubelet.yaml"
    path.write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 250\n"
                    "podCIDR: 127.70.0.0/22\ncontainerLogMaxSize: 5Mi\nnodeStatusUpdateFrequency: 1m30s\nsyncFrequency: 500ms\n"
                    "registerWithTaints: [{key: dedicated, value: gpu, effect: NoSchedule}]\n")
    config = kubelet_cli.build_config(_args("--config", str(path), "--node-name", "n1", "--node-labels", "zone=a,tier=web"))
    assert config.max_pods == 250 and config.pod_cidr == "127.70.0.0/22" and config.container_log_max_size == 5 * 1024**2
    assert config.node_status_update_frequency == 90.0 and config.sync_frequency == 0.5
    assert config.node_labels == {"zone": "a", "tier": "web"} and config.register_with_taints[0]["effect"] == "NoSchedule"
    flagged = kubelet_cli.build_config(_args("--config", str(path), "--max-pods", "30", "--pod-cidr", "127.99.0.0/24",
                                             "--register-with-taints", "a=b:NoExecute"))
    assert flagged.max_pods == 30 and flagged.pod_cidr == "127.99.0.0/24"
    assert flagged.register_with_taints == [{"key": "a", "value": "b", "effect": "NoExecute"}]
    direct = load_kubelet_configuration(str(path), KubeletConfig())
    assert direct.node_status_update_frequency == 90.0 and direct.sync_frequency == 0.5


def test_certificate_settings_come_from_the_file_or_the_flags(tmp_path) -> None:
    path = tmp_path / "kubelet.yaml"
    path.write_text("kind: KubeletConfiguration\nserverTLSBootstrap: true\nrotateCertificates: true\n")
    config = kubelet_cli.build_config(_args("--config", str(path)))
    assert config.server_tls_bootstrap and config.rotate_certificates
    assert kubelet_cli.build_config(_args("--server-tls-bootstrap")).server_tls_bootstrap
    assert not kubelet_cli.build_config(_args("--config", str(path), "--server-tls-bootstrap=false")).server_tls_bootstrap
    assert not kubelet_cli.build_config(_args()).server_tls_bootstrap


def test_the_cri_endpoints_come_from_the_file_or_the_flags(tmp_path) -> None:
    path = tmp_path / "kubelet.yaml"
    path.write_text("kind: KubeletConfiguration\ncontainerRuntimeEndpoint: unix:///run/a.sock\n"
                    "imageServiceEndpoint: unix:///run/images.sock\n")
    config = kubelet_cli.build_config(_args("--config", str(path)))
    assert (config.container_runtime_endpoint, config.image_service_endpoint) == ("unix:///run/a.sock", "unix:///run/images.sock")
    flagged = kubelet_cli.build_config(_args("--config", str(path), "--image-service-endpoint", "unix:///run/b.sock"))
    assert (flagged.container_runtime_endpoint, flagged.image_service_endpoint) == ("unix:///run/a.sock", "unix:///run/b.sock")
    bare = kubelet_cli.build_config(_args())
    assert (bare.container_runtime_endpoint, bare.image_service_endpoint) == ("", "")  # the process runtime


def test_bad_inputs_say_what_to_do() -> None:
    with pytest.raises(SystemExit, match="key=value:Effect"):
        kubelet_cli.build_config(_args("--register-with-taints", "oops"))
    assert parse_quantity_bytes("1Gi") == 1024**3 and parse_quantity_bytes("10M") == 10_000_000


def test_the_node_object_carries_capacity_labels_taints_and_conditions() -> None:
    host = HostReadings(cpus=4, memory_bytes=8 * 1024**3, memory_available=50 * 1024**2, disk_bytes=100, disk_available=5,
                        pids_used=10, pid_max=100, kernel="6.1", os_image="Debian", boot_id="b", machine_id="m")
    cfg = KubeletConfig(node_name="n1", max_pods=42, node_labels={"x": "y"}, system_reserved={"cpu": "500m"},
                        register_with_taints=[{"key": "k", "effect": "NoSchedule"}])
    node = build_node(cfg, host, runtime_version="rt://1", port=1234, images=[])
    st = node["status"]
    assert st["capacity"]["cpu"] == "4" and st["capacity"]["pods"] == "42" and st["allocatable"]["cpu"] == "3500m"
    assert node["metadata"]["labels"]["x"] == "y" and node["spec"]["taints"] == [{"key": "k", "effect": "NoSchedule"}]
    assert st["daemonEndpoints"]["kubeletEndpoint"]["Port"] == 1234 and st["nodeInfo"]["kubeletVersion"].startswith("v1.32.")
    conds = {c["type"]: c["status"] for c in node_conditions(host)}
    assert conds == {"MemoryPressure": "True", "DiskPressure": "True", "PIDPressure": "False", "Ready": "True"}


def test_an_image_service_endpoint_without_a_runtime_endpoint_is_refused(tmp_path) -> None:
    import subprocess
    import sys

    from tests.support.kube import Kubectl
    from tests.support.servers import ServerThread, sqlite_storage

    with ServerThread(sqlite_storage(str(tmp_path / "data"))) as server:
        kubeconfig = Kubectl(server.url, str(tmp_path / "home")).kubeconfig
        done = subprocess.run([sys.executable, "-m", "k8py", "kubelet", "--kubeconfig", kubeconfig, "--root-dir", str(tmp_path / "k"),
                               "--node-name", "n1", "--port", "0", "--image-service-endpoint", "unix:///run/images.sock"],
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "--image-service-endpoint is the CRI runtime's image socket: give --container-runtime-endpoint too" in done.stderr
