"""The layer contracts in pyproject.toml hold (import-linter)."""

import shutil
import subprocess
import sys


def test_import_linter_contracts_are_kept():
    lint = shutil.which("lint-imports")
    cmd = [lint] if lint else [sys.executable, "-m", "importlinter.cli"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "broken" in result.stdout and " 0 broken" in result.stdout
