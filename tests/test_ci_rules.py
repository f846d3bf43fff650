"""CI rules: every test runs in CI, and no test is skipped for an unlisted reason.

``scripts/test`` and the tests find etcd and kubectl, and recognise CI, by
one rule (tests/support/tools.py); the skip policy (tests/support/skip_policy.py)
turns a skip without a listed reason into a failed run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from k8py.cli.etcd import ETCD_BINARY
from tests.support import tools

REPO = Path(__file__).resolve().parent.parent


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in tools._CI_VARIABLES}
    env.update(extra)
    return env


def _run_pytest(tmp_path: Path, body: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    test = tmp_path / "test_sample.py"
    test.write_text("import pytest\n\n\n" + body)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.support.skip_policy", "--rootdir", str(tmp_path), "-c", os.devnull, str(test)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )


def test_a_skip_without_a_listed_reason_fails_the_run(tmp_path):
    result = _run_pytest(tmp_path, "def test_x():\n    pytest.skip('the network is slow today')\n", _clean_env())
    assert result.returncode == 1, result.stdout + result.stderr
    assert "the network is slow today" in result.stdout


def test_a_skip_with_a_listed_reason_passes(tmp_path):
    body = "def test_x():\n    pytest.skip('no writable cgroup v1 memory hierarchy on this machine: limits are only recorded')\n"
    result = _run_pytest(tmp_path, body, _clean_env())
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_missing_tool_is_an_acceptable_skip_only_outside_ci(tmp_path):
    body = f"@pytest.mark.skipif(True, reason={tools.ETCD_MISSING!r})\ndef test_x():\n    pass\n"
    assert _run_pytest(tmp_path, body, _clean_env()).returncode == 0
    assert _run_pytest(tmp_path, body, _clean_env(GITLAB_CI="true")).returncode == 1


@pytest.mark.parametrize(
    "env, expected",
    [({}, False), ({"CI": "true"}, True), ({"CI": "false"}, False), ({"GITHUB_ACTIONS": "true"}, True),
     ({"BUILDKITE": "1"}, True), ({"JENKINS_URL": "http://ci"}, True), ({"K8PY_CI": "1"}, True), ({"TF_BUILD": "True"}, True)],
)
def test_ci_is_recognised_however_the_runner_says_so(env, expected):
    assert tools.in_ci(env) is expected


def test_scripts_and_tests_look_for_etcd_where_k8py_runs_it():
    assert tools.etcd_binary() == ETCD_BINARY


def test_in_ci_a_missing_etcd_fails_before_any_test_runs(tmp_path):
    missing = str(tmp_path / "no-etcd-here")
    script = [sys.executable, str(REPO / "tests/support/tools.py"), "require"]
    in_ci = subprocess.run(script, env=_clean_env(K8PY_ETCD_BINARY=missing, K8PY_CI="1"), capture_output=True, text=True, timeout=60)
    assert in_ci.returncode == 1 and "etcd" in in_ci.stderr
    outside = subprocess.run(script, env=_clean_env(K8PY_ETCD_BINARY=missing), capture_output=True, text=True, timeout=60)
    assert outside.returncode == 0 and "skipped" in outside.stderr
