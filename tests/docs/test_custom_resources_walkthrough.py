"""docs/13-custom-resources.md, run as written (the runner of docs/01's test)."""

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

DOC = Path(__file__).resolve().parents[2] / "docs" / "13-custom-resources.md"


def test_the_custom_resources_walkthrough_runs_as_written(tmp_path):
    work = tmp_path / "k8py-crd"
    home = tmp_path / "home"
    home.mkdir()
    text = DOC.read_text().replace("/tmp/k8py-crd", str(work))
    (start, start_expected), *rest = steps(text)
    assert len(rest) == 5, "the CRD, two writes, the bad rules (undefined field, type error)"
    run_walkthrough(start, start_expected, rest, work=work, home=home)
