"""docs/13-images.md: its build-and-push commands (umoci, skopeo) and its Verification, for real.

The registry runs on a free port instead of 5000 and the demo directory is a
temporary one; the commands are otherwise the doc's, so an image built and
pushed by Debian's tools (not the tests' Python builder) is what the kubelet pulls.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.kube import Kubectl
from tests.support.kubelet import KubeletProcess
from tests.support.oci_registry import Registry
from tests.support.servers import ServerProcess

DOC = Path(__file__).resolve().parents[2] / "docs" / "13-images.md"


def _blocks(text: str) -> list[tuple[str, str]]:
    return re.findall(r"^```(\w*)\n(.*?)^```$", text, re.S | re.M)


def test_images_walkthrough_verification(tmp_path) -> None:
    for tool in ("umoci", "skopeo", "docker-registry"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is missing: scripts/test installs it (Debian package {tool})")
    demo = str(tmp_path / "demo")
    blocks = _blocks(DOC.read_text())
    sh = [body for lang, body in blocks if lang == "sh"]
    build = next(b for b in sh if "umoci init" in b)
    run = next(b for b in sh if "kubectl run" in b)
    expected_logs = blocks[[b for _, b in blocks].index("kubectl logs hello\n") + 1][1].strip()
    with Registry(str(tmp_path / "registry")) as reg:  # the doc's registry step, on a free port
        script = build.replace("/tmp/demo", demo).replace("127.0.0.1:5000", reg.host)
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        with ServerProcess(str(tmp_path / "api")) as server:
            kubectl = Kubectl(server.url, str(tmp_path / "home"))
            with KubeletProcess(kubectl.kubeconfig, str(tmp_path / "kubelet"), node_name="node-1") as kubelet:
                env = {**os.environ, "HOME": kubectl.home, "KUBECONFIG": kubectl.kubeconfig}
                started = subprocess.run(["bash", "-c", run.replace("127.0.0.1:5000", reg.host)], env=env, capture_output=True, text=True)
                assert started.returncode == 0 and "pod/hello created" in started.stdout, started.stderr
                deadline = time.monotonic() + 90
                logs = ""
                while time.monotonic() < deadline and "ID=" not in logs:
                    logs = kubectl.run("logs", "hello", check=False).stdout
                    time.sleep(0.3)
                assert logs.strip() == expected_logs == "ID=hello-from-the-image", (
                    kubectl.run("get", "pod", "hello", "-o", "yaml").stdout + kubectl.run("get", "events").stdout + "".join(kubelet.output))
                image_id = kubectl.run("get", "pod", "hello", "-o", "jsonpath={.status.containerStatuses[0].imageID}").stdout
                assert re.fullmatch(rf"{re.escape(reg.host)}/demo/hello@sha256:[0-9a-f]{{64}}", image_id), image_id
                kubectl.run("delete", "pod", "hello", "--grace-period=1")
