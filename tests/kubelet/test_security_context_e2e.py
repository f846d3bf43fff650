"""e2e: a container's securityContext, as its own ``/proc/self/status`` shows it.

A real API server and kubelet (process runtime, bubblewrap, the kubelet running as root as
on these machines); each container prints the lines of ``/proc/self/status`` that say who
it runs as and with what capabilities, and the test reads them from ``kubectl logs``. The
expected capability masks are containerd's: the default set is ``00000000a80425fb``.
"""

from __future__ import annotations

import os
import shutil

import pytest

from tests.kubelet.conftest import Node, phase, pod_manifest

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("bwrap") or not shutil.which("setpriv"),
                                reason="needs root, bwrap and setpriv: the kubelet applies securityContext that way")

DEFAULT = 0xA80425FB
NET_ADMIN, CHOWN, NET_BIND_SERVICE = 1 << 12, 1 << 0, 1 << 10
REPORT = "grep -E '^(Uid|Gid|Groups|CapEff|CapPrm|CapBnd|NoNewPrivs):' /proc/self/status"


def _status(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("Uid", "Gid", "Groups", "CapEff", "CapPrm", "CapBnd", "NoNewPrivs"):
            out[key] = value.strip()
    return out


def _container(name: str, script: str = "", **sc: object) -> dict[str, object]:
    return {"name": name, "image": "busybox", "command": ["sh", "-c", f"{REPORT}; {script}"], "securityContext": sc}


def _node_bounding() -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        return next(int(line.split()[1], 16) for line in f if line.startswith("CapBnd:"))


def test_capabilities_users_and_groups_show_in_the_containers_proc_status(node: Node, ns: str) -> None:
    containers = [
        _container("default", "touch /etc/k8py-probe 2>&1 || true"),
        _container("added", capabilities={"add": ["NET_ADMIN"], "drop": ["CHOWN"]}),
        _container("only-bind", capabilities={"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}),
        _container("user", "echo made > /data/f; stat -c 'owner=%u:%g' /data/f; stat -c 'dir=%a:%g' /data; "
                   "cat /etc/cfg/key; stat -L -c 'cfg=%g' /etc/cfg/key",
                   runAsUser=1000, runAsGroup=3000, allowPrivilegeEscalation=False),
        _container("privileged", "test -e /dev/kmsg && echo host-dev", privileged=True),
        _container("readonly", "touch /x 2>&1 || echo refused", readOnlyRootFilesystem=True),
    ]
    for c in containers:
        if c["name"] == "user":
            c["volumeMounts"] = [{"name": "data", "mountPath": "/data"}, {"name": "cfg", "mountPath": "/etc/cfg"}]
    node.core.create_namespaced_config_map(ns, {"metadata": {"name": "cfg"}, "data": {"key": "value"}})
    node.core.create_namespaced_pod(ns, pod_manifest(
        "sc", containers, restartPolicy="Never",
        securityContext={"supplementalGroups": [4000], "fsGroup": 2000},
        volumes=[{"name": "data", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "cfg"}}]))
    node.wait_pod(ns, "sc", phase("Succeeded"), what="Succeeded")
    logs = {c["name"]: node.kubectl.run("logs", "sc", "-n", ns, "-c", str(c["name"])).stdout for c in containers}
    st = {name: _status(text) for name, text in logs.items()}

    # the default: containerd's 14 capabilities, root, effective as bounded
    assert int(st["default"]["CapEff"], 16) == DEFAULT and int(st["default"]["CapBnd"], 16) == DEFAULT, logs["default"]
    assert st["default"]["Uid"].split() == ["0"] * 4
    assert "Read-only file system" in logs["default"]  # the host view is read-only
    # add and drop, by name without CAP_
    assert int(st["added"]["CapEff"], 16) == (DEFAULT | NET_ADMIN) & ~CHOWN, logs["added"]
    assert int(st["only-bind"]["CapEff"], 16) == NET_BIND_SERVICE == int(st["only-bind"]["CapBnd"], 16)
    # another user: no effective capabilities (no ambient ones upstream either), the set still bounds it
    user = st["user"]
    assert user["Uid"].split() == ["1000"] * 4 and user["Gid"].split() == ["3000"] * 4, logs["user"]
    assert sorted(user["Groups"].split()) == ["2000", "4000"]  # supplementalGroups and fsGroup
    assert int(user["CapEff"], 16) == 0 == int(user["CapPrm"], 16) and int(user["CapBnd"], 16) == DEFAULT
    assert user["NoNewPrivs"] == "1"
    # the fsGroup owns the volumes: the emptyDir is setgid, a new file is in the group; so is the configMap
    assert "owner=1000:2000" in logs["user"] and "dir=2777:2000" in logs["user"], logs["user"]
    assert "value" in logs["user"] and "cfg=2000" in logs["user"]
    # privileged: every capability the node has, and the host's devices
    assert int(st["privileged"]["CapEff"], 16) == _node_bounding(), logs["privileged"]
    assert "host-dev" in logs["privileged"]
    assert "refused" in logs["readonly"]


def test_exec_runs_with_the_containers_user_and_capabilities(node: Node, ns: str) -> None:
    node.core.create_namespaced_pod(ns, pod_manifest("ex", [
        {"name": "c", "image": "busybox", "command": ["sleep", "600"],
         "securityContext": {"runAsUser": 1234, "runAsGroup": 1234, "capabilities": {"drop": ["ALL"]}}}],
        terminationGracePeriodSeconds=1))
    node.wait_pod(ns, "ex", phase("Running"), what="Running")
    out = node.kubectl.run("exec", "ex", "-n", ns, "--", "sh", "-c", REPORT).stdout
    st = _status(out)
    assert st["Uid"].split()[0] == "1234" and int(st["CapBnd"], 16) == 0, out
    node.kubectl.run("delete", "pod", "ex", "-n", ns, "--wait=false")


def test_run_as_non_root_without_a_user_is_refused_as_upstream(node: Node, ns: str) -> None:
    node.core.create_namespaced_pod(ns, pod_manifest("nr", [
        {"name": "c", "image": "busybox", "command": ["true"], "securityContext": {"runAsNonRoot": True}}], restartPolicy="Never"))

    def config_error(pod: dict) -> bool:
        sts = (pod.get("status") or {}).get("containerStatuses") or []
        return bool(sts) and (sts[0]["state"].get("waiting") or {}).get("reason") == "CreateContainerConfigError"

    pod = node.wait_pod(ns, "nr", config_error, what="CreateContainerConfigError")
    msg = pod["status"]["containerStatuses"][0]["state"]["waiting"]["message"]
    assert msg.startswith("container has runAsNonRoot and image will run as root (pod: \"nr_"), msg


def test_setuid_binaries_do_not_raise_privileges_under_bubblewrap_whatever_allow_privilege_escalation_says(
        node: Node, ns: str, tmp_path) -> None:
    # the documented limit (docs/05-kubelet.md, "What the process runtime cannot give"): bwrap sets
    # no_new_privs for every container (and binds every mount nosuid), so a setuid-root binary runs
    # with its caller's uid. Upstream (runc, allowPrivilegeEscalation true by default) it runs as euid 0.
    bindir = tmp_path / "suid"
    bindir.mkdir()
    shutil.copy("/usr/bin/id", bindir / "id")
    os.chmod(bindir / "id", 0o4755)
    os.chmod(tmp_path, 0o755)
    os.chmod(bindir, 0o755)
    script = "echo euid=$(/suid/id -u); grep NoNewPrivs /proc/self/status"
    containers = [{"name": name, "image": "busybox", "command": ["sh", "-c", script], "volumeMounts": [{"name": "suid", "mountPath": "/suid"}],
                   "securityContext": {"runAsUser": 1000, "runAsGroup": 1000, **sc}}
                  for name, sc in (("default", {}), ("allowed", {"allowPrivilegeEscalation": True}))]
    node.core.create_namespaced_pod(ns, pod_manifest("suid", containers, restartPolicy="Never",
                                                     volumes=[{"name": "suid", "hostPath": {"path": str(bindir)}}]))
    node.wait_pod(ns, "suid", phase("Succeeded"), what="Succeeded")
    for name in ("default", "allowed"):
        out = node.kubectl.run("logs", "suid", "-n", ns, "-c", name).stdout
        assert "euid=1000" in out and _status(out)["NoNewPrivs"] == "1", (name, out)
