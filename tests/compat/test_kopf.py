"""kopf, the best-known Python operator framework, runs unchanged against k8py.

It lists and watches with bookmarks, merge-patches the objects it handles,
writes Events, and reacts to updates — the API paths an operator depends on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request

from tests.support.kube import Kubectl

OPERATOR = os.path.join(os.path.dirname(__file__), "kopf_operator.py")


def _wait_for(check, timeout: float = 20.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def _watchers(url: str, resource: str) -> float:
    with urllib.request.urlopen(f"{url}/metrics") as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith(f'apiserver_registered_watchers{{resource="{resource}"}}'):
                return float(line.split()[-1])
    return 0.0


def test_a_kopf_operator_handles_creates_and_updates(kubectl: Kubectl):
    env = {**os.environ, "KUBECONFIG": kubectl.kubeconfig, "HOME": kubectl.home}
    operator = subprocess.Popen(
        [sys.executable, "-m", "kopf", "run", "--standalone", "--all-namespaces", OPERATOR],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        # the operator has listed and is watching configmaps (the server counts its watch)
        assert _wait_for(lambda: _watchers(kubectl.url, "configmaps") >= 1, timeout=60), "kopf never started watching"
        kubectl.run("create", "configmap", "demo", "--from-literal=a=b")
        kubectl.run("label", "configmap", "demo", "kopf-demo=yes")

        def handled() -> dict | None:
            cm = json.loads(kubectl.run("get", "configmap", "demo", "-o", "json").stdout)
            return cm if cm.get("data", {}).get("handled") == "by-kopf" else None

        cm = _wait_for(handled)
        assert cm is not None, "kopf did not handle the creation"
        assert "kopf.zalando.org/last-handled-configuration" in cm["metadata"]["annotations"]
        events = _wait_for(lambda: "kopf handled demo" in kubectl.run("get", "events").stdout)
        assert events, "kopf's event did not arrive"

        kubectl.run("annotate", "configmap", "demo", "touch=1")
        updated = _wait_for(
            lambda: json.loads(kubectl.run("get", "configmap", "demo", "-o", "json").stdout)["metadata"]["annotations"].get("kopf-demo/updated")
        )
        assert updated == "true"
    finally:
        operator.terminate()
        output = operator.communicate(timeout=30)[0]
    assert "Handler 'created' succeeded" in output
    assert "Traceback" not in output, output[-3000:]
