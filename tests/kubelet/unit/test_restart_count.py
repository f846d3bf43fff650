"""The restart count of a container's next run (from its previous run, else its log directory), and when a dead
sandbox is made again."""

from __future__ import annotations

import os

from k8py.kubelet.container_start import next_attempt
from k8py.kubelet.pod_actions import PodActions, compute_pod_actions
from k8py.kubelet.pod_status import ContainerView, container_statuses
from k8py.kubelet.runtime.protocols import ContainerState, ContainerStatus


def run(attempt: int, state: ContainerState = ContainerState.EXITED) -> ContainerStatus:
    return ContainerStatus(id=f"c{attempt}", sandbox_id="s", name="main", attempt=attempt, state=state, image="busybox",
                           started_at=1.0, finished_at=2.0, exit_code=137)


def test_the_next_run_counts_on_from_the_previous_one(tmp_path) -> None:
    assert next_attempt(run(4), str(tmp_path), "main") == 5
    assert next_attempt(None, str(tmp_path), "main") == 0  # a first run: no previous one, no logs


def test_without_a_previous_run_the_log_directory_says_how_many_there_were(tmp_path) -> None:
    logs = tmp_path / "main"
    logs.mkdir()
    for name in ("0.log", "3.log", "7.log.20260101-120000", "9.log.2.gz", "notes.txt", "12.log.bak"):
        (logs / name).write_text("")
    assert next_attempt(None, str(tmp_path), "main") == 10
    assert next_attempt(None, str(tmp_path), "sidecar") == 0  # another container's logs do not count
    os.rename(logs / "9.log.2.gz", logs / "x.gz")
    assert next_attempt(None, str(tmp_path), "main") == 8


def test_a_container_not_yet_made_again_in_a_new_sandbox_keeps_its_count_and_last_state() -> None:
    # the pod's sandbox died: the last run there is the previous one until the new sandbox has a run
    [st] = container_statuses([ContainerView("main", "busybox", latest=None, previous=run(2))], "containerd",
                              default_waiting="ContainerCreating")
    assert st["restartCount"] == 2 and st["lastState"]["terminated"]["exitCode"] == 137
    assert st["state"] == {"waiting": {"reason": "ContainerCreating"}}
    [st] = container_statuses([ContainerView("main", "busybox", latest=run(3, ContainerState.RUNNING), previous=run(2))],
                              "containerd", default_waiting="ContainerCreating")
    assert st["restartCount"] == 3 and "running" in st["state"] and st["lastState"]["terminated"]["containerID"] == "containerd://c2"


def _pod(policy: str) -> dict:
    return {"metadata": {"name": "p", "namespace": "d", "uid": "u"},
            "spec": {"restartPolicy": policy, "containers": [{"name": "main", "image": "busybox"}]}}


def _plan(policy: str, latest: dict) -> PodActions:
    return compute_pod_actions(_pod(policy), sandbox_ready=False, latest=latest, ever_initialized=True,
                               probe_failed=lambda cid: "", is_started=lambda cid: True)


def test_a_dead_sandbox_is_made_again_unless_the_pod_must_not_restart() -> None:
    running = run(0, ContainerState.RUNNING)
    for policy in ("Always", "OnFailure"):
        assert _plan(policy, {"main": running}).create_sandbox
    never = _plan("Never", {"main": running})
    # upstream's computePodActions: no new sandbox once its containers ran; what runs in the dead one is killed
    assert not never.create_sandbox and list(never.kill) == [running.id] and never.start == []
    assert not _plan("Never", {"main": run(0)}).kill  # already exited: nothing to kill, no new run either
    assert _plan("Never", {}).create_sandbox  # no container ever ran (the first sandbox failed): try again
