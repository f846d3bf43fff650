"""Pure pieces of the kubelet: the plan, the phase, back-off, merge patches, images, env."""

from __future__ import annotations

import pytest

from k8py.kubelet.backoff import Backoff
from k8py.kubelet.container_env import expand, service_env
from k8py.kubelet.pod_actions import compute_pod_actions
from k8py.kubelet.pod_status import ContainerView, PodView, build_pod_status, qos_class
from k8py.kubelet.runtime.process.images import ImageCatalog, repository_name
from k8py.kubelet.runtime.protocols import ContainerState, ContainerStatus, RuntimeErrorStatus
from k8py.kubelet.status_manager import merge_diff


def cs(name: str, state: ContainerState, code: int = 0, attempt: int = 0, cid: str = "") -> ContainerStatus:
    return ContainerStatus(id=cid or f"{name}-{attempt}", sandbox_id="s", name=name, attempt=attempt, state=state, image="busybox",
                           started_at=1.0, finished_at=2.0 if state is ContainerState.EXITED else 0.0, exit_code=code)


def pod(policy: str = "Always", init: list[dict] | None = None, containers: list[str] = ("a",)) -> dict:
    return {"metadata": {"name": "p", "namespace": "d", "uid": "u"},
            "spec": {"restartPolicy": policy, "initContainers": init or [], "containers": [{"name": c, "image": "busybox"} for c in containers]}}


def plan(p: dict, latest: dict, *, ready: bool = True, initialized: bool = False, failed: dict | None = None, started=lambda _: True):
    return compute_pod_actions(p, sandbox_ready=ready, latest=latest, ever_initialized=initialized,
                               probe_failed=lambda cid: (failed or {}).get(cid, ""), is_started=started)


def test_a_new_pod_gets_a_sandbox_and_its_first_init_container_only() -> None:
    a = plan(pod(init=[{"name": "i1"}, {"name": "i2"}]), {}, ready=False)
    assert a.create_sandbox and a.start_init == ["i1"] and a.start == [] and not a.initialized


def test_init_containers_run_in_order_and_then_the_containers_start() -> None:
    p = pod(init=[{"name": "i1"}, {"name": "i2"}], containers=["a", "b"])
    assert plan(p, {"i1": cs("i1", ContainerState.RUNNING)}).start_init == []
    assert plan(p, {"i1": cs("i1", ContainerState.EXITED)}).start_init == ["i2"]
    done = plan(p, {"i1": cs("i1", ContainerState.EXITED), "i2": cs("i2", ContainerState.EXITED)})
    assert done.initialized and done.start == ["a", "b"]


def test_a_failed_init_container_fails_the_pod_under_never_and_restarts_otherwise() -> None:
    latest = {"i1": cs("i1", ContainerState.EXITED, code=1)}
    assert plan(pod("Never", init=[{"name": "i1"}]), latest).init_failed
    again = plan(pod("OnFailure", init=[{"name": "i1"}]), latest)
    assert not again.init_failed and again.start_init == ["i1"]


def test_a_sidecar_must_be_started_before_the_next_init_container() -> None:
    p = pod(init=[{"name": "side", "restartPolicy": "Always"}, {"name": "i2"}])
    running = {"side": cs("side", ContainerState.RUNNING)}
    assert plan(p, running, started=lambda _: False).start_init == []
    assert plan(p, running, started=lambda _: True).start_init == ["i2"]


@pytest.mark.parametrize("policy,code,restart", [("Always", 0, True), ("Always", 1, True), ("OnFailure", 0, False),
                                                 ("OnFailure", 1, True), ("Never", 1, False), ("Never", 0, False)])
def test_restart_policy_decides_whether_an_exited_container_restarts(policy: str, code: int, restart: bool) -> None:
    a = plan(pod(policy), {"a": cs("a", ContainerState.EXITED, code=code)}, initialized=True)
    assert (a.start == ["a"]) is restart


def test_a_container_that_failed_its_liveness_probe_is_killed() -> None:
    a = plan(pod(), {"a": cs("a", ContainerState.RUNNING, cid="x")}, initialized=True, failed={"x": "liveness"})
    assert a.kill == {"x": "liveness"}


def _status(policy: str, latest: ContainerStatus | None, *, waiting: str = "", previous: ContainerStatus | None = None) -> dict:
    view = PodView(pod=pod(policy), sandbox_ready=True, pod_ip="127.64.0.2", host_ip="127.0.0.1", runtime_name="rt",
                   containers=[ContainerView("a", "busybox", latest, previous, waiting)], initialized=True, start_time="2026-01-01T00:00:00Z")
    return build_pod_status(view, now=0)


def test_phases_follow_get_phase() -> None:
    assert _status("Always", None)["phase"] == "Pending"
    assert _status("Always", cs("a", ContainerState.RUNNING))["phase"] == "Running"
    assert _status("Never", cs("a", ContainerState.EXITED, 0))["phase"] == "Succeeded"
    assert _status("Never", cs("a", ContainerState.EXITED, 1))["phase"] == "Failed"
    assert _status("OnFailure", cs("a", ContainerState.EXITED, 1))["phase"] == "Running"
    crash = _status("Always", cs("a", ContainerState.EXITED, 1, attempt=3), waiting="CrashLoopBackOff")
    st = crash["containerStatuses"][0]
    assert crash["phase"] == "Running" and st["restartCount"] == 3
    assert st["state"] == {"waiting": {"reason": "CrashLoopBackOff"}} and st["lastState"]["terminated"]["exitCode"] == 1


def test_conditions_and_ids_are_reported_as_upstream() -> None:
    st = _status("Always", cs("a", ContainerState.RUNNING, cid="abc"))
    assert st["containerStatuses"][0]["containerID"] == "rt://abc"
    conds = {c["type"]: c for c in st["conditions"]}
    assert conds["Ready"]["status"] == "False" and conds["Ready"]["message"] == "containers with unready status: [a]"
    assert conds["PodReadyToStartContainers"]["status"] == "True" and st["podIPs"] == [{"ip": "127.64.0.2"}]


def _gated(conditions: list[dict]) -> dict:
    p = pod("Always")
    p["spec"]["readinessGates"] = [{"conditionType": "example.com/lb"}, {"conditionType": "example.com/dns"}]
    p["status"] = {"conditions": conditions}
    view = PodView(pod=p, sandbox_ready=True, pod_ip="127.64.0.2", host_ip="127.0.0.1", runtime_name="rt",
                   containers=[ContainerView("a", "busybox", cs("a", ContainerState.RUNNING), ready=True, started=True)],
                   initialized=True)
    return {c["type"]: c for c in build_pod_status(view, now=0)["conditions"]}


def test_readiness_gates_hold_ready_until_their_conditions_are_true_and_are_kept() -> None:
    conds = _gated([{"type": "example.com/lb", "status": "False"}])
    assert conds["ContainersReady"]["status"] == "True"
    assert conds["Ready"]["status"] == "False" and conds["Ready"]["reason"] == "ReadinessGatesNotReady"
    assert conds["Ready"]["message"] == ('the status of pod readiness gate "example.com/lb" is not "True", but False, '
                                         'corresponding condition of pod readiness gate "example.com/dns" does not exist.')
    assert conds["example.com/lb"] == {"type": "example.com/lb", "status": "False"}  # someone else's: kept as it is
    conds = _gated([{"type": "example.com/lb", "status": "True"}, {"type": "example.com/dns", "status": "True"},
                    {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}])
    assert conds["Ready"]["status"] == "True" and "reason" not in conds["Ready"]
    assert conds["DisruptionTarget"]["reason"] == "EvictionByEvictionAPI"


def test_qos_class() -> None:
    p = pod()
    assert qos_class(p) == "BestEffort"
    p["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1", "memory": "1Gi"}}
    assert qos_class(p) == "Guaranteed"
    p["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    assert qos_class(p) == "Burstable"


def test_backoff_doubles_to_its_cap_and_expires() -> None:
    b = Backoff(10, 40)
    assert not b.in_backoff_since("k", 100, 100)
    assert [b.next("k", t) for t in (100, 101, 102, 103)] == [10, 20, 40, 40]
    assert b.in_backoff_since("k", 103, 120) and not b.in_backoff_since("k", 103, 144)
    assert b.next("k", 1000) == 10  # untouched for more than 2 x max: starts over


def test_merge_diff_nulls_removed_keys_and_replaces_lists() -> None:
    old = {"state": {"running": {"startedAt": "t"}}, "list": [1, 2], "same": 1}
    new = {"state": {"terminated": {"exitCode": 0}}, "list": [1], "same": 1}
    assert merge_diff(old, new) == {"state": {"running": None, "terminated": {"exitCode": 0}}, "list": [1]}


def test_the_image_catalog_strips_registries_and_refuses_unknown_or_invalid_names() -> None:
    assert repository_name("registry.k8s.io/pause:3.9") == "pause" and repository_name("docker.io/library/nginx@sha256:" + "a" * 64) == "nginx"
    cat = ImageCatalog({"myapp": {"entrypoint": ["/bin/app"], "cmd": ["--serve"]}})
    assert cat.resolve("busybox:1.36").argv([], ["echo", "hi"]) == ["echo", "hi"]
    assert cat.resolve("example.com/team/myapp:v1").argv([], []) == ["/bin/app", "--serve"]
    assert cat.resolve("myapp").argv(["/bin/other"], ["x"]) == ["/bin/other", "x"]
    with pytest.raises(RuntimeErrorStatus) as err:
        cat.resolve("nope:1")
    assert err.value.reason == "ErrImagePull"
    with pytest.raises(RuntimeErrorStatus) as err:
        cat.resolve("Bad:Image:Name")
    assert err.value.reason == "InvalidImageName"


def test_var_expansion_and_service_environment() -> None:
    assert expand("$(A)-$(B)-$$(A)-$(MISSING)", {"A": "1", "B": "2"}) == "1-2-$(A)-$(MISSING)"
    svc = {"metadata": {"name": "my-svc", "namespace": "d"}, "spec": {"clusterIP": "10.0.0.5", "ports": [{"port": 80, "name": "http"}]}}
    master = {"metadata": {"name": "kubernetes", "namespace": "default"}, "spec": {"clusterIP": "10.0.0.1", "ports": [{"port": 443, "name": "https"}]}}
    env = service_env([svc, master], "d", links=True)
    assert env["MY_SVC_SERVICE_HOST"] == "10.0.0.5" and env["MY_SVC_PORT_80_TCP_ADDR"] == "10.0.0.5" and env["MY_SVC_SERVICE_PORT_HTTP"] == "80"
    assert env["KUBERNETES_SERVICE_HOST"] == "10.0.0.1" and env["KUBERNETES_PORT"] == "tcp://10.0.0.1:443"
    assert "MY_SVC_SERVICE_HOST" not in service_env([svc, master], "d", links=False)


def test_a_new_image_in_the_spec_restarts_the_running_container() -> None:
    p = pod()
    p["spec"]["containers"][0]["image"] = "busybox:1.37"
    a = plan(p, {"a": cs("a", ContainerState.RUNNING, cid="x")}, initialized=True)
    assert "definition changed" in a.kill["x"] and a.start == ["a"]


def test_ephemeral_containers_start_once_even_before_init_ends_and_never_count_for_the_phase() -> None:
    p = pod("Always", init=[{"name": "i1"}])
    p["spec"]["ephemeralContainers"] = [{"name": "dbg", "image": "busybox"}]
    assert plan(p, {}, ready=False).start_ephemeral == []  # no sandbox yet
    running_init = plan(p, {"i1": cs("i1", ContainerState.RUNNING)})
    assert running_init.start_ephemeral == ["dbg"] and not running_init.initialized
    exited = {"i1": cs("i1", ContainerState.EXITED), "a": cs("a", ContainerState.RUNNING), "dbg": cs("dbg", ContainerState.EXITED, code=1)}
    assert plan(p, exited).start_ephemeral == [] and "dbg" not in plan(p, exited).start  # never restarted
    status = build_pod_status(PodView(
        pod=p, sandbox_ready=True, pod_ip="127.1.0.2", host_ip="127.0.0.1", runtime_name="process",
        init=[ContainerView("i1", "busybox", exited["i1"])], containers=[ContainerView("a", "busybox", exited["a"], ready=True, started=True)],
        ephemeral=[ContainerView("dbg", "busybox", exited["dbg"])], initialized=True))
    assert status["phase"] == "Running"
    assert any(c["type"] == "Ready" and c["status"] == "True" for c in status["conditions"])
    (eph,) = status["ephemeralContainerStatuses"]
    assert eph["name"] == "dbg" and eph["state"]["terminated"]["exitCode"] == 1 and eph["ready"] is False
