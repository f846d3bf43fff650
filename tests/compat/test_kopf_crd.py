"""A kopf operator of a CustomResourceDefinition runs unchanged against k8py:
it discovers the CRD's resource, watches it, writes handler results through
the status subresource, and holds deletion with its finalizer until its
delete handler has run — what operator authors test against a cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.compat.test_kopf import _wait_for, _watchers
from tests.support.kube import Kubectl

OPERATOR = os.path.join(os.path.dirname(__file__), "kopf_crd_operator.py")

CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: crontabs, singular: crontab, kind: CronTab, shortNames: [ct]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              cronSpec: {type: string}
              replicas: {type: integer, default: 1}
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
"""

CR = """\
apiVersion: stable.example.com/v1
kind: CronTab
metadata: {name: nightly}
spec: {cronSpec: "0 3 * * *"}
"""


def test_a_kopf_operator_handles_a_custom_resource(kubectl: Kubectl) -> None:
    kubectl.run("apply", "-f", "-", input=CRD)
    kubectl.run("wait", "--for=condition=Established", "crd/crontabs.stable.example.com", "--timeout=60s")
    env = {**os.environ, "KUBECONFIG": kubectl.kubeconfig, "HOME": kubectl.home}
    operator = subprocess.Popen(
        [sys.executable, "-m", "kopf", "run", "--standalone", "--all-namespaces", OPERATOR],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        assert _wait_for(lambda: _watchers(kubectl.url, "crontabs") >= 1, timeout=60), "kopf never watched crontabs"
        kubectl.run("apply", "-f", "-", input=CR)

        def get() -> dict:
            return json.loads(kubectl.run("get", "crontab", "nightly", "-o", "json").stdout)

        handled = _wait_for(lambda: (get().get("status") or {}).get("create_fn"), timeout=60)
        assert handled == {"schedule-seen": "0 3 * * *", "for": "nightly"}
        cr = get()
        assert "kopf.zalando.org/KopfFinalizerMarker" in cr["metadata"]["finalizers"]
        assert cr["spec"]["replicas"] == 1  # the schema's default

        kubectl.run("patch", "crontab", "nightly", "--type", "merge", "-p", '{"spec":{"replicas":4}}')
        assert _wait_for(lambda: (get().get("status") or {}).get("replicas") == 4, timeout=60)

        kubectl.run("delete", "crontab", "nightly", "--timeout=60s")
        assert "nightly" not in kubectl.run("get", "crontabs", "-o", "name").stdout
    finally:
        operator.terminate()
        output = operator.communicate(timeout=30)[0]
    assert "Handler 'create_fn' succeeded" in output, output[-3000:]
    assert "cleaned up after nightly" in output, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
