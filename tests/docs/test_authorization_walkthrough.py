"""docs/14-authorization.md, run as written (the harness of the API server walkthrough)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.docs.test_apiserver_walkthrough import run_walkthrough, steps
from tests.support.kube import KUBECTL

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(not os.path.exists(KUBECTL), reason="kubectl not installed"),
]

DOC = Path(__file__).resolve().parents[2] / "docs" / "14-authorization.md"


def test_the_authorization_walkthrough_runs_as_written(tmp_path):
    work = tmp_path / "k8py-demo"
    home = tmp_path / "home"
    home.mkdir()
    text = DOC.read_text().replace("/tmp/k8py-demo", str(work))
    (start, start_expected), *rest = steps(text)
    assert "--authorization-mode Node,RBAC" in start and len(rest) == 3
    run_walkthrough(start, start_expected, rest, work=work, home=home)
