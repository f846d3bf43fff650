"""Loading kubeconfigs as kubectl does, and in-cluster config."""

from __future__ import annotations

import base64
import os

import pytest
import yaml

from k8py.client.config import ConfigError, in_cluster_config
from k8py.client.kubeconfig import load_kubeconfig


def _write(path, doc) -> str:
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def _doc(name: str, server: str, *, current: str | None = None, user: dict | None = None, cluster: dict | None = None, ns: str | None = None) -> dict:
    ctx = {"cluster": name, "user": name}
    if ns:
        ctx["namespace"] = ns
    return {
        "clusters": [{"name": name, "cluster": {"server": server, **(cluster or {})}}],
        "users": [{"name": name, "user": user or {}}],
        "contexts": [{"name": name, "context": ctx}],
        "current-context": current or "",
    }


def test_first_file_wins_for_names_and_current_context(tmp_path):
    a = _write(tmp_path / "a", _doc("one", "https://a:6443", current="one", user={"token": "tok-a"}))
    b = _write(tmp_path / "b", {**_doc("one", "https://b:6443", current="two"), "contexts": [
        {"name": "one", "context": {"cluster": "one", "user": "one"}},
        {"name": "two", "context": {"cluster": "one", "user": "one", "namespace": "kube-system"}}]})
    cfg = load_kubeconfig(environ={"KUBECONFIG": f"{a}{os.pathsep}{tmp_path / 'missing'}{os.pathsep}{b}"})
    assert cfg.server == "https://a:6443"
    assert cfg.bearer_token() == "tok-a"
    assert cfg.namespace == "default"
    other = load_kubeconfig(environ={"KUBECONFIG": f"{a}{os.pathsep}{b}"}, context="two")
    assert other.namespace == "kube-system" and other.server == "https://a:6443"


def test_home_kube_config_is_the_default(tmp_path):
    (tmp_path / ".kube").mkdir()
    _write(tmp_path / ".kube" / "config", _doc("h", "http://127.0.0.1:1", current="h", ns="team"))
    cfg = load_kubeconfig(environ={"HOME": str(tmp_path)})
    assert cfg.server == "http://127.0.0.1:1" and cfg.namespace == "team"


def test_relative_paths_resolve_against_the_file_and_data_is_base64(tmp_path):
    (tmp_path / "sub").mkdir()
    path = _write(tmp_path / "sub" / "config", _doc(
        "c", "https://x", current="c",
        cluster={"certificate-authority": "ca.pem"},
        user={"client-certificate-data": base64.b64encode(b"CERT").decode(), "client-key": "key.pem", "tokenFile": "tok"}))
    (tmp_path / "sub" / "tok").write_text("from-file\n")
    cfg = load_kubeconfig(path)
    assert cfg.ca_file == str(tmp_path / "sub" / "ca.pem")
    assert cfg.key_file == str(tmp_path / "sub" / "key.pem")
    assert cfg.cert_data == b"CERT"
    assert cfg.auth_headers() == {"Authorization": "Bearer from-file"}


def test_insecure_skip_tls_verify_gives_an_unverified_context(tmp_path):
    import ssl

    cfg = load_kubeconfig(_write(tmp_path / "c", _doc("c", "https://x", current="c", cluster={"insecure-skip-tls-verify": True})))
    ctx = cfg.ssl_context()
    assert ctx is not None and ctx.verify_mode == ssl.CERT_NONE


def test_missing_context_is_a_config_error(tmp_path):
    path = _write(tmp_path / "c", _doc("c", "https://x"))
    with pytest.raises(ConfigError):
        load_kubeconfig(path)
    with pytest.raises(ConfigError):
        load_kubeconfig(path, context="nope")


def test_in_cluster_config_reads_the_service_account(tmp_path):
    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "namespace").write_text("apps")
    cfg = in_cluster_config(environ={"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"},
                            service_account_dir=str(tmp_path))
    assert cfg.server == "https://10.96.0.1:443"
    assert cfg.namespace == "apps" and cfg.bearer_token() == "sa-token"
    with pytest.raises(ConfigError):
        in_cluster_config(environ={}, service_account_dir=str(tmp_path))


def test_kubeconfig_written_by_the_cli_reaches_the_server(apiserver, tmp_path):
    cfg = load_kubeconfig(apiserver.write_kubeconfig(str(tmp_path / "kc")))
    assert cfg.server == apiserver.url
