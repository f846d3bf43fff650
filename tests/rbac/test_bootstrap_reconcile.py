"""The bootstrap policy is reconciled at every start: created once, missing parts
put back, nothing written on a clean restart, and autoupdate=false respected."""

from __future__ import annotations

import os

from k8py.apiserver.server import APIServer, APIServerConfig
from k8py.storage.sqlite import SqliteStorage

RBAC = "rbac.authorization.k8s.io"


def _start(data: str) -> APIServer:
    return APIServer(SqliteStorage(os.path.join(data, "db")), APIServerConfig(endpoint_reconciler_interval=0.0, secure_port=None, insecure_port=0))


async def test_reconciliation_creates_repairs_and_respects_autoupdate_false(tmp_path) -> None:
    server = _start(str(tmp_path))
    await server.start()
    crd = server.registry.get(RBAC, "v1", "clusterroles")
    crb = server.registry.get(RBAC, "v1", "clusterrolebindings")
    node = await server.store.get(crd, "", "system:node")
    assert node["metadata"]["labels"] == {"kubernetes.io/bootstrapping": "rbac-defaults"}
    assert node["metadata"]["annotations"] == {"rbac.authorization.kubernetes.io/autoupdate": "true"}
    # an operator trims one role and takes another over; a binding loses its subject
    await server.store.guaranteed_update(crd, "", "system:kube-dns", lambda o: {**o, "rules": []})
    await server.store.guaranteed_update(crd, "", "system:heapster", lambda o: {
        **o, "rules": [], "metadata": {**o["metadata"], "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "false"}}})
    await server.store.guaranteed_update(crb, "", "system:basic-user", lambda o: {**o, "subjects": []})
    await server.stop()

    server = _start(str(tmp_path))
    await server.start()
    dns = await server.store.get(crd, "", "system:kube-dns")
    assert dns["rules"] == [{"verbs": ["list", "watch"], "apiGroups": [""], "resources": ["endpoints", "services"]}]
    assert (await server.store.get(crd, "", "system:heapster"))["rules"] == []
    assert (await server.store.get(crb, "", "system:basic-user"))["subjects"] == [
        {"kind": "Group", "apiGroup": RBAC, "name": "system:authenticated"}]
    revision = await server.storage.current_revision()
    await server.stop()

    server = _start(str(tmp_path))  # a clean restart writes nothing
    await server.start()
    try:
        for prefix in ("/registry/clusterroles/", "/registry/clusterrolebindings/", "/registry/roles/", "/registry/rolebindings/"):
            listed = await server.storage.list(prefix)
            assert len(listed.kvs) > 5
            assert [kv.key for kv in listed.kvs if kv.mod_revision > revision] == []
    finally:
        await server.stop()


#: upstream's v1.32 controller roles with their feature gates at the defaults (controller_policy.go)
UPSTREAM_CONTROLLERS = (
    "attachdetach-controller", "clusterrole-aggregation-controller", "cronjob-controller", "daemon-set-controller",
    "deployment-controller", "disruption-controller", "endpoint-controller", "endpointslice-controller",
    "endpointslicemirroring-controller", "expand-controller", "ephemeral-volume-controller", "generic-garbage-collector",
    "horizontal-pod-autoscaler", "job-controller", "namespace-controller", "node-controller", "persistent-volume-binder",
    "pod-garbage-collector", "replicaset-controller", "replication-controller", "resourcequota-controller",
    "route-controller", "service-account-controller", "service-controller", "statefulset-controller", "ttl-controller",
    "certificate-controller", "pvc-protection-controller", "pv-protection-controller", "ttl-after-finished-controller",
    "root-ca-cert-publisher", "validatingadmissionpolicy-status-controller", "legacy-service-account-token-cleaner",
    "taint-eviction-controller",
)


async def test_every_upstream_controller_role_is_there_and_bound_to_its_service_account(tmp_path) -> None:
    server = _start(str(tmp_path))
    await server.start()
    try:
        crd = server.registry.get(RBAC, "v1", "clusterroles")
        crb = server.registry.get(RBAC, "v1", "clusterrolebindings")
        for name in UPSTREAM_CONTROLLERS:
            role = await server.store.get(crd, "", f"system:controller:{name}")
            assert role["rules"], name
            binding = await server.store.get(crb, "", f"system:controller:{name}")
            assert binding["roleRef"]["name"] == f"system:controller:{name}"
            assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": "kube-system"}]
        route = await server.store.get(crd, "", "system:controller:route-controller")
        assert {"verbs": ["patch"], "apiGroups": [""], "resources": ["nodes/status"]} in route["rules"]
    finally:
        await server.stop()
