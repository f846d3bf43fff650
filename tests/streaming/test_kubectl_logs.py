"""``kubectl logs`` through the API server's pods/log to the kubelet's containerLogs."""

from __future__ import annotations

import time

import pytest

from tests.support.kubelet_server import write_log


def test_logs_show_stdout_and_stderr_in_order(cluster):
    cluster.pod("web")
    c = cluster.runtime.add("default", "web", "main")
    write_log(c.log_path, ("stdout", "one"), ("stderr", "two"), ("stdout", "three"))
    assert cluster.kubectl.run("logs", "web").stdout == "one\ntwo\nthree\n"


def test_partial_records_join_into_one_line(cluster):
    cluster.pod("web")
    c = cluster.runtime.add("default", "web", "main")
    write_log(c.log_path, ("stdout", "hel"), partial=True)
    write_log(c.log_path, ("stdout", "lo"))
    assert cluster.kubectl.run("logs", "web").stdout == "hello\n"


def test_tail_and_timestamps(cluster):
    cluster.pod("web")
    c = cluster.runtime.add("default", "web", "main")
    write_log(c.log_path, *[("stdout", f"line {i}") for i in range(10)], at=1764578401.5)
    out = cluster.kubectl.run("logs", "web", "--tail=2", "--timestamps").stdout.splitlines()
    assert [line.split(" ", 1)[1] for line in out] == ["line 8", "line 9"]
    assert out[0].startswith("2025-12-01T08:40:01.5000")
    assert out[0].split(" ")[0].endswith("Z") and len(out[0].split(" ")[0]) == len("2025-12-01T08:40:01.500000000Z")


def test_since_skips_older_records(cluster):
    cluster.pod("web")
    c = cluster.runtime.add("default", "web", "main")
    write_log(c.log_path, ("stdout", "old"), at=time.time() - 3600)
    write_log(c.log_path, ("stdout", "new"))
    assert cluster.kubectl.run("logs", "web", "--since=10m").stdout == "new\n"
    assert cluster.kubectl.run("logs", "web", "--since-time=2000-01-01T00:00:00Z").stdout == "old\nnew\n"


def test_limit_bytes_cuts_the_output(cluster):
    cluster.pod("web")
    c = cluster.runtime.add("default", "web", "main")
    write_log(c.log_path, ("stdout", "abcdefgh"))
    assert cluster.kubectl.run("logs", "web", "--limit-bytes=3").stdout == "abc"


def test_container_flag_and_all_containers(cluster):
    cluster.pod("web", "main", "side")
    a = cluster.runtime.add("default", "web", "main")
    b = cluster.runtime.add("default", "web", "side")
    write_log(a.log_path, ("stdout", "from main"))
    write_log(b.log_path, ("stdout", "from side"))
    assert cluster.kubectl.run("logs", "web", "-c", "side").stdout == "from side\n"
    defaulted = cluster.kubectl.run("logs", "web")
    assert defaulted.stdout == "from main\n"
    assert 'Defaulted container "main" out of: main, side' in defaulted.stderr
    # kubectl keeps its requests in a map: the containers come in any order
    assert sorted(cluster.kubectl.run("logs", "web", "--all-containers").stdout.splitlines()) == ["from main", "from side"]
    prefixed = cluster.kubectl.run("logs", "web", "--all-containers", "--prefix").stdout.splitlines()
    assert sorted(prefixed) == ["[pod/web/main] from main", "[pod/web/side] from side"]


def test_previous_shows_the_attempt_before(cluster):
    cluster.pod("web")
    old = cluster.runtime.add("default", "web", "main", attempt=0, running=False, exit_code=1)
    new = cluster.runtime.add("default", "web", "main", attempt=1)
    write_log(old.log_path, ("stdout", "first run"))
    write_log(new.log_path, ("stdout", "second run"))
    assert cluster.kubectl.run("logs", "web").stdout == "second run\n"
    assert cluster.kubectl.run("logs", "web", "--previous").stdout == "first run\n"


def test_previous_without_a_terminated_attempt_is_a_bad_request(cluster):
    cluster.pod("web")
    cluster.runtime.add("default", "web", "main")
    result = cluster.kubectl.run("logs", "web", "--previous", check=False)
    assert result.returncode == 1
    assert 'Error from server (BadRequest): previous terminated container "main" in pod "web" not found' in result.stderr


def test_a_container_not_started_yet_says_it_is_waiting(cluster):
    cluster.pod("web")
    result = cluster.kubectl.run("logs", "web", check=False)
    assert result.returncode == 1
    assert 'container "main" in pod "web" is waiting to start: ContainerCreating' in result.stderr


def test_unknown_container_and_unbound_pod_are_refused_by_the_api_server(cluster):
    cluster.pod("web")
    result = cluster.kubectl.run("logs", "web", "-c", "nope", check=False)
    assert "container nope is not valid for pod web" in result.stderr
    cluster.core.create_namespaced_pod("default", {"metadata": {"name": "floating"}, "spec": {"containers": [{"name": "main", "image": "busybox"}]}})
    result = cluster.kubectl.run("logs", "floating", check=False)
    assert "Error from server (BadRequest): pod floating does not have a host assigned" in result.stderr


def test_invalid_log_options_are_422(cluster):
    cluster.pod("web")
    cluster.runtime.add("default", "web", "main")
    from kubernetes.client.rest import ApiException

    with pytest.raises(ApiException) as err:
        cluster.core.read_namespaced_pod_log("web", "default", since_seconds=0)
    assert err.value.status == 422
    import json

    status = json.loads(err.value.body)
    assert status["reason"] == "Invalid"
    assert status["message"] == 'PodLogOptions "web" is invalid: sinceSeconds: Invalid value: 0: must be greater than 0'


def test_follow_streams_new_lines_and_ends_when_the_container_exits(cluster):
    cluster.pod("web")
    c = cluster.runtime.add("default", "web", "main")
    write_log(c.log_path, ("stdout", "before"))
    proc = cluster.kubectl.popen("logs", "-f", "web")
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "before\n"
        write_log(c.log_path, ("stdout", "after"))
        assert proc.stdout.readline() == "after\n"
        cluster.runtime.exit(c.id)
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        proc.wait()


def test_follow_reopens_a_rotated_file(cluster):
    import os

    cluster.pod("web")
    c = cluster.runtime.add("default", "web", "main")
    write_log(c.log_path, ("stdout", "in the first file"))
    proc = cluster.kubectl.popen("logs", "-f", "web")
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "in the first file\n"
        os.rename(c.log_path, c.log_path + ".20261201-084000")
        write_log(c.log_path, ("stdout", "in the new file"))
        assert proc.stdout.readline() == "in the new file\n"
    finally:
        proc.kill()
        proc.wait()


def test_the_official_client_streams_logs(cluster):
    cluster.pod("web")
    c = cluster.runtime.add("default", "web", "main")
    write_log(c.log_path, ("stdout", "a"), ("stdout", "b"))
    resp = cluster.core.read_namespaced_pod_log("web", "default", follow=True, _preload_content=False)
    try:
        first = resp.readline()
        assert first == b"a\n"
        cluster.runtime.exit(c.id)
        assert resp.read() == b"b\n"
    finally:
        resp.release_conn()


def test_follow_all_containers_streams_each(cluster):
    cluster.pod("web", "main", "side")
    a = cluster.runtime.add("default", "web", "main")
    b = cluster.runtime.add("default", "web", "side")
    proc = cluster.kubectl.popen("logs", "-f", "--all-containers", "--prefix", "web")
    try:
        assert proc.stdout is not None
        write_log(a.log_path, ("stdout", "from main"))
        write_log(b.log_path, ("stdout", "from side"))
        got = {proc.stdout.readline(), proc.stdout.readline()}
        assert got == {"[pod/web/main] from main\n", "[pod/web/side] from side\n"}
        cluster.runtime.exit(a.id)
        cluster.runtime.exit(b.id)
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        proc.wait()


def test_an_unreachable_kubelet_is_a_clear_503(cluster):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    from tests.support.kubelet_server import register_node

    register_node(cluster.client, "node-2", dead)
    cluster.pod("elsewhere", node="node-2")
    result = cluster.kubectl.run("logs", "elsewhere", check=False)
    assert result.returncode == 1
    assert "Error from server (ServiceUnavailable): cannot reach the kubelet of node 'node-2'" in result.stderr
    assert "is it running?" in result.stderr
