"""A small sample operator: every Namespace labelled ``team=<name>`` gets a
ConfigMap ``team-info`` with ``data.team: <name>``, kept in step with the
label. Written with the official ``kubernetes`` client (list, then watch
from the list's resourceVersion), as many small operators are; its test
suite (``tests/``) runs it against a k8py cluster through the
``k8py_cluster`` and ``k8py_namespace`` fixtures of the k8py pytest plugin.

Run it against any cluster: ``python team_operator.py`` (uses $KUBECONFIG).
"""

from __future__ import annotations

import threading

import kubernetes

CONFIGMAP = "team-info"


def reconcile(core: kubernetes.client.CoreV1Api, namespace: dict) -> None:
    """Make the namespace's ConfigMap match its ``team`` label (or go when the label does)."""
    name = namespace["metadata"]["name"]
    team = (namespace["metadata"].get("labels") or {}).get("team")
    if namespace.get("status", {}).get("phase") == "Terminating":
        return
    try:
        current = core.read_namespaced_config_map(CONFIGMAP, name)
    except kubernetes.client.ApiException as err:
        if err.status != 404:
            raise
        current = None
    if team is None:
        if current is not None:
            core.delete_namespaced_config_map(CONFIGMAP, name)
        return
    body = {"metadata": {"name": CONFIGMAP, "labels": {"app.kubernetes.io/managed-by": "team-operator"}}, "data": {"team": team}}
    if current is None:
        core.create_namespaced_config_map(name, body)
    elif (current.data or {}).get("team") != team:
        core.patch_namespaced_config_map(CONFIGMAP, name, {"data": {"team": team}})


def run(api: kubernetes.client.ApiClient, stop: threading.Event) -> None:
    """List and reconcile every Namespace, then follow the watch until ``stop`` is set."""
    core = kubernetes.client.CoreV1Api(api)
    while not stop.is_set():
        listed = api.sanitize_for_serialization(core.list_namespace())
        for namespace in listed["items"]:
            reconcile(core, namespace)
        watch = kubernetes.watch.Watch()
        try:
            for event in watch.stream(core.list_namespace, resource_version=listed["metadata"]["resourceVersion"],
                                      timeout_seconds=1, _preload_content=False):
                if event["type"] in ("ADDED", "MODIFIED"):
                    reconcile(core, event["raw_object"])
                if stop.is_set():
                    break
        except kubernetes.client.ApiException as err:
            if err.status != 410:  # Expired: list again
                raise
        finally:
            watch.stop()


if __name__ == "__main__":  # pragma: no cover
    kubernetes.config.load_kube_config()
    run(kubernetes.client.ApiClient(), threading.Event())
