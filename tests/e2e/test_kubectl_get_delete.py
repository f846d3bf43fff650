"""``kubectl get`` output formats and watches, ``delete`` in its forms, and the
cluster-level commands (``explain``, ``api-resources``, ``api-versions``,
``version``, ``cluster-info``).

The plain get variants are in tests/apiserver/test_kubectl_basic.py; these go
further: watch events as kubectl prints them, custom columns, every ``all``
kind, graceful deletion of bound pods, and exact discovery lists.
"""

from __future__ import annotations

import subprocess
import time

import kubernetes
import pytest

from tests.e2e.conftest import NS, LineReader, deployment, pod, rows


@pytest.fixture
def core(k8s) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(k8s)


@pytest.fixture
def apps(k8s) -> kubernetes.client.AppsV1Api:
    return kubernetes.client.AppsV1Api(k8s)


def bind(core: kubernetes.client.CoreV1Api, name: str, node: str = "node-a") -> None:
    """Schedule a pod the way the scheduler does: POST pods/NAME/binding."""
    body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}, "target": {"kind": "Node", "name": node}}
    response = core.create_namespaced_pod_binding(name, NS, body, _preload_content=False)
    assert response.status == 201


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)


# -- get ------------------------------------------------------------------------------


def test_get_watch_prints_each_event_with_output_watch_events(kubectl, core):
    core.create_namespaced_pod(NS, pod("w1"))
    proc = kubectl.popen("get", "pods", "-w", "--output-watch-events")
    try:
        reader = LineReader(proc)
        assert reader.next().split() == ["EVENT", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
        assert reader.next().split()[:4] == ["ADDED", "w1", "0/1", "Pending"]
        core.patch_namespaced_pod("w1", NS, {"metadata": {"labels": {"seen": "yes"}}})
        assert reader.next().split()[:4] == ["MODIFIED", "w1", "0/1", "Pending"]
        core.create_namespaced_pod(NS, pod("w2"))
        assert reader.next().split()[:4] == ["ADDED", "w2", "0/1", "Pending"]
        core.delete_namespaced_pod("w2", NS)
        assert reader.next().split()[:4] == ["DELETED", "w2", "0/1", "Pending"]
    finally:
        stop(proc)


def test_get_watch_on_deployments_shows_a_scale(kubectl, apps):
    apps.create_namespaced_deployment(NS, deployment("web"))
    proc = kubectl.popen("get", "deployments", "-w")
    try:
        reader = LineReader(proc)
        assert reader.next().split() == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
        assert reader.next().split()[:4] == ["web", "0/1", "0", "0"]
        apps.patch_namespaced_deployment_scale("web", NS, {"spec": {"replicas": 4}})
        assert reader.next().split()[:4] == ["web", "0/4", "0", "0"]
    finally:
        stop(proc)


def test_get_jsonpath_range_and_custom_columns(kubectl, core):
    core.create_namespaced_pod(NS, pod("a", {"app": "web"}, node="node-a"))
    core.create_namespaced_pod(NS, pod("b", {"app": "db"}))
    ranged = kubectl.run(
        "get", "pods", "-o", 'jsonpath={range .items[*]}{.metadata.name}{"\\t"}{.metadata.labels.app}{"\\n"}{end}'
    )
    assert ranged.stdout == "a\tweb\nb\tdb\n"
    filtered = kubectl.run("get", "pods", "-o", 'jsonpath={.items[?(@.metadata.labels.app=="db")].metadata.name}')
    assert filtered.stdout == "b"
    columns = kubectl.run(
        "get", "pods", "-o", "custom-columns=NAME:.metadata.name,IMAGE:.spec.containers[0].image,NODE:.spec.nodeName"
    )
    assert columns.stdout.splitlines() == [
        "NAME   IMAGE        NODE",
        "a      nginx:1.27   node-a",
        "b      nginx:1.27   <none>",
    ]


def test_get_all_lists_every_kind_in_the_all_category(kubectl, k8s, core, apps):
    batch = kubernetes.client.BatchV1Api(k8s)
    core.create_namespaced_pod(NS, pod("solo"))
    apps.create_namespaced_deployment(NS, deployment("web", replicas=2))
    rs = deployment("rs")
    rs["kind"] = "ReplicaSet"
    apps.create_namespaced_replica_set(NS, rs)
    ds = deployment("ds")
    ds["kind"] = "DaemonSet"
    del ds["spec"]["replicas"]
    apps.create_namespaced_daemon_set(NS, ds)
    sts = deployment("sts")
    sts["kind"] = "StatefulSet"
    sts["spec"]["serviceName"] = "sts"
    apps.create_namespaced_stateful_set(NS, sts)
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}
    batch.create_namespaced_job(NS, {"metadata": {"name": "once"}, "spec": {"template": template}})
    batch.create_namespaced_cron_job(
        NS, {"metadata": {"name": "tick"}, "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": template}}}}
    )
    out = kubectl.run("get", "all").stdout
    sections = [block.splitlines() for block in out.strip().split("\n\n")]
    headers = [rows(block[0])[0] for block in sections]
    assert headers == [
        ["NAME", "READY", "STATUS", "RESTARTS", "AGE"],
        ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"],
        ["NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "NODE", "SELECTOR", "AGE"],
        ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
        ["NAME", "DESIRED", "CURRENT", "READY", "AGE"],
        ["NAME", "READY", "AGE"],
        ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST", "SCHEDULE", "AGE"],
        ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"],
    ]
    names = [[line.split()[0] for line in block[1:]] for block in sections]
    assert names == [
        ["pod/solo"],
        ["service/kubernetes"],
        ["daemonset.apps/ds"],
        ["deployment.apps/web"],
        ["replicaset.apps/rs"],
        ["statefulset.apps/sts"],
        ["cronjob.batch/tick"],
        ["job.batch/once"],
    ]
    assert sections[3][1].split()[1:4] == ["0/2", "0", "0"]
    assert sections[6][1].split()[1:5] == ["*/5", "*", "*", "*"]


# -- delete -----------------------------------------------------------------------------


def test_delete_by_file_and_by_label(kubectl, core, apps, tmp_path):
    manifest = tmp_path / "objs.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c1}\ndata: {a: b}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: from-file}\nspec:\n  containers: [{name: main, image: busybox}]\n"
    )
    created = kubectl.run("create", "-f", str(manifest))
    assert created.stdout == "configmap/c1 created\npod/from-file created\n"
    deleted = kubectl.run("delete", "-f", str(manifest))
    assert deleted.stdout == 'configmap "c1" deleted\npod "from-file" deleted\n'
    assert core.list_namespaced_config_map(NS, field_selector="metadata.name=c1").items == []
    again = kubectl.run("delete", "-f", str(manifest), check=False)
    assert again.returncode == 1
    assert again.stderr.splitlines() == [
        'Error from server (NotFound): error when deleting "%s": configmaps "c1" not found' % manifest,
        'Error from server (NotFound): error when deleting "%s": pods "from-file" not found' % manifest,
    ]

    for name, app in (("a", "web"), ("b", "web"), ("c", "db")):
        core.create_namespaced_pod(NS, pod(name, {"app": app}))
    assert kubectl.run("delete", "pods", "-l", "app=web").stdout == 'pod "a" deleted\npod "b" deleted\n'
    assert [p.metadata.name for p in core.list_namespaced_pod(NS).items] == ["c"]
    none = kubectl.run("delete", "pods", "-l", "app=nothing")
    assert (none.stdout, none.stderr) == ("No resources found\n", "")


def test_a_bound_pod_stays_terminating_until_deleted_with_grace_zero(kubectl, core):
    core.create_namespaced_pod(NS, pod("bound"))
    bind(core, "bound")
    assert kubectl.run("delete", "pod", "bound", "--wait=false").stdout == 'pod "bound" deleted\n'
    stored = core.read_namespaced_pod("bound", NS)
    assert stored.metadata.deletion_timestamp is not None
    assert stored.metadata.deletion_grace_period_seconds == 30
    table = rows(kubectl.run("get", "pods").stdout)
    assert table[1][:3] == ["bound", "0/1", "Terminating"]

    forced = kubectl.run("delete", "pod", "bound", "--grace-period=0", "--force")
    assert forced.stdout == 'pod "bound" force deleted\n'
    assert forced.stderr == (
        "Warning: Immediate deletion does not wait for confirmation that the running resource has been terminated. "
        "The resource may continue to run on the cluster indefinitely.\n"
    )
    assert core.list_namespaced_pod(NS).items == []


def test_delete_waits_for_the_deleted_event_of_a_terminating_pod(kubectl, core):
    core.create_namespaced_pod(NS, pod("slow"))
    bind(core, "slow")
    proc = kubectl.popen("delete", "pod", "slow")
    try:
        deadline = time.monotonic() + 10
        while core.read_namespaced_pod("slow", NS).metadata.deletion_timestamp is None:
            assert time.monotonic() < deadline, "kubectl never sent the DELETE"
            time.sleep(0.05)
        time.sleep(0.5)
        assert proc.poll() is None, "kubectl returned before the pod was gone"
        # the kubelet's part: finish the deletion
        core.delete_namespaced_pod("slow", NS, grace_period_seconds=0)
        out, err = proc.communicate(timeout=10)
    finally:
        stop(proc)
    assert (proc.returncode, out, err) == (0, 'pod "slow" deleted\n', "")


def test_a_pod_not_bound_to_a_node_is_deleted_at_once(kubectl, core):
    core.create_namespaced_pod(NS, pod("pending"))
    assert kubectl.run("delete", "pod", "pending", "--wait=false").stdout == 'pod "pending" deleted\n'
    assert core.list_namespaced_pod(NS).items == []


# -- cluster-level commands ------------------------------------------------------------------


def test_explain_walks_into_pod_spec_containers(kubectl):
    out = kubectl.run("explain", "pods.spec.containers").stdout
    lines = out.splitlines()
    assert lines[:4] == ["KIND:       Pod", "VERSION:    v1", "", "FIELD: containers <[]Container>"]
    assert "    List of containers belonging to the pod. Containers cannot currently be" in lines
    fields = [line.strip() for line in lines if line.startswith("  ") and not line.startswith("   ")]
    assert "name\t<string> -required-" in fields
    assert "image\t<string>" in fields
    assert "ports\t<[]ContainerPort>" in fields
    assert "resources\t<ResourceRequirements>" in fields
    assert [f.split("\t")[0] for f in fields] == sorted(f.split("\t")[0] for f in fields)
    deployment_replicas = kubectl.run("explain", "deployment.spec.replicas").stdout.splitlines()
    assert deployment_replicas[:4] == ["GROUP:      apps", "KIND:       Deployment", "VERSION:    v1", ""]
    assert deployment_replicas[4] == "FIELD: replicas <integer>"
    bogus = kubectl.run("explain", "pods.spec.bogus", check=False)
    assert (bogus.returncode, bogus.stderr) == (1, 'error: field "bogus" does not exist\n')


#: (name, short names, apiVersion, namespaced, kind) in kubectl's order (group, then name)
API_RESOURCE_ROWS = [
    ('bindings', '', 'v1', 'true', 'Binding'),
    ('configmaps', 'cm', 'v1', 'true', 'ConfigMap'),
    ('endpoints', 'ep', 'v1', 'true', 'Endpoints'),
    ('events', 'ev', 'v1', 'true', 'Event'),
    ('limitranges', 'limits', 'v1', 'true', 'LimitRange'),
    ('namespaces', 'ns', 'v1', 'false', 'Namespace'),
    ('nodes', 'no', 'v1', 'false', 'Node'),
    ('pods', 'po', 'v1', 'true', 'Pod'),
    ('replicationcontrollers', 'rc', 'v1', 'true', 'ReplicationController'),
    ('resourcequotas', 'quota', 'v1', 'true', 'ResourceQuota'),
    ('secrets', '', 'v1', 'true', 'Secret'),
    ('serviceaccounts', 'sa', 'v1', 'true', 'ServiceAccount'),
    ('services', 'svc', 'v1', 'true', 'Service'),
    ('mutatingwebhookconfigurations', '', 'admissionregistration.k8s.io/v1', 'false', 'MutatingWebhookConfiguration'),
    ('validatingadmissionpolicies', '', 'admissionregistration.k8s.io/v1', 'false', 'ValidatingAdmissionPolicy'),
    ('validatingadmissionpolicybindings', '', 'admissionregistration.k8s.io/v1', 'false', 'ValidatingAdmissionPolicyBinding'),
    ('validatingwebhookconfigurations', '', 'admissionregistration.k8s.io/v1', 'false', 'ValidatingWebhookConfiguration'),
    ('customresourcedefinitions', 'crd,crds', 'apiextensions.k8s.io/v1', 'false', 'CustomResourceDefinition'),
    ('apiservices', '', 'apiregistration.k8s.io/v1', 'false', 'APIService'),
    ('controllerrevisions', '', 'apps/v1', 'true', 'ControllerRevision'),
    ('daemonsets', 'ds', 'apps/v1', 'true', 'DaemonSet'),
    ('deployments', 'deploy', 'apps/v1', 'true', 'Deployment'),
    ('replicasets', 'rs', 'apps/v1', 'true', 'ReplicaSet'),
    ('statefulsets', 'sts', 'apps/v1', 'true', 'StatefulSet'),
    ('selfsubjectreviews', '', 'authentication.k8s.io/v1', 'false', 'SelfSubjectReview'),
    ('tokenreviews', '', 'authentication.k8s.io/v1', 'false', 'TokenReview'),
    ('localsubjectaccessreviews', '', 'authorization.k8s.io/v1', 'true', 'LocalSubjectAccessReview'),
    ('selfsubjectaccessreviews', '', 'authorization.k8s.io/v1', 'false', 'SelfSubjectAccessReview'),
    ('selfsubjectrulesreviews', '', 'authorization.k8s.io/v1', 'false', 'SelfSubjectRulesReview'),
    ('subjectaccessreviews', '', 'authorization.k8s.io/v1', 'false', 'SubjectAccessReview'),
    ('horizontalpodautoscalers', 'hpa', 'autoscaling/v2', 'true', 'HorizontalPodAutoscaler'),
    ('cronjobs', 'cj', 'batch/v1', 'true', 'CronJob'),
    ('jobs', '', 'batch/v1', 'true', 'Job'),
    ('certificatesigningrequests', 'csr', 'certificates.k8s.io/v1', 'false', 'CertificateSigningRequest'),
    ('leases', '', 'coordination.k8s.io/v1', 'true', 'Lease'),
    ('endpointslices', '', 'discovery.k8s.io/v1', 'true', 'EndpointSlice'),
    ('events', 'ev', 'events.k8s.io/v1', 'true', 'Event'),
    ('flowschemas', '', 'flowcontrol.apiserver.k8s.io/v1', 'false', 'FlowSchema'),
    ('prioritylevelconfigurations', '', 'flowcontrol.apiserver.k8s.io/v1', 'false', 'PriorityLevelConfiguration'),
    ('nodes', '', 'metrics.k8s.io/v1beta1', 'false', 'NodeMetrics'),
    ('pods', '', 'metrics.k8s.io/v1beta1', 'true', 'PodMetrics'),
    ('ingressclasses', '', 'networking.k8s.io/v1', 'false', 'IngressClass'),
    ('ingresses', 'ing', 'networking.k8s.io/v1', 'true', 'Ingress'),
    ('networkpolicies', 'netpol', 'networking.k8s.io/v1', 'true', 'NetworkPolicy'),
    ('poddisruptionbudgets', 'pdb', 'policy/v1', 'true', 'PodDisruptionBudget'),
    ('clusterrolebindings', '', 'rbac.authorization.k8s.io/v1', 'false', 'ClusterRoleBinding'),
    ('clusterroles', '', 'rbac.authorization.k8s.io/v1', 'false', 'ClusterRole'),
    ('rolebindings', '', 'rbac.authorization.k8s.io/v1', 'true', 'RoleBinding'),
    ('roles', '', 'rbac.authorization.k8s.io/v1', 'true', 'Role'),
    ('priorityclasses', 'pc', 'scheduling.k8s.io/v1', 'false', 'PriorityClass'),
    ('csidrivers', '', 'storage.k8s.io/v1', 'false', 'CSIDriver'),
    ('csinodes', '', 'storage.k8s.io/v1', 'false', 'CSINode'),
    ('csistoragecapacities', '', 'storage.k8s.io/v1', 'true', 'CSIStorageCapacity'),
    ('storageclasses', 'sc', 'storage.k8s.io/v1', 'false', 'StorageClass'),
    ('volumeattachments', '', 'storage.k8s.io/v1', 'false', 'VolumeAttachment'),
]


def _tabwriter(rows: list[tuple[str, ...]]) -> str:
    """kubectl's table: each column as wide as its widest cell plus 3 spaces, the last unpadded."""
    widths = [max(len(r[i]) for r in rows) + 3 for i in range(len(rows[0]) - 1)]
    return "".join("".join(c.ljust(w) for c, w in zip(r, widths)) + r[-1] + "\n" for r in rows)


API_RESOURCES = _tabwriter([("NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"), *API_RESOURCE_ROWS])


def test_api_resources_and_api_versions_are_the_exact_lists(kubectl):
    assert kubectl.run("api-resources").stdout == API_RESOURCES
    wide = rows(kubectl.run("api-resources", "-o", "wide").stdout)
    assert wide[0] == ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND", "VERBS", "CATEGORIES"]
    by_name: dict[str, list[str]] = {}
    for r in wide[1:]:
        by_name.setdefault(r[0], r)  # the core group's row comes first (metrics.k8s.io has pods and nodes too)
    assert by_name["pods"][5:] == ["create,delete,deletecollection,get,list,patch,update,watch", "all"]
    assert by_name["bindings"][1:] == ["v1", "true", "Binding", "create"]
    assert by_name["namespaces"][5:] == ["create,delete,get,list,patch,update,watch"]
    only_apps = kubectl.run("api-resources", "--api-group=apps", "-o", "name").stdout
    assert only_apps == "controllerrevisions.apps\ndaemonsets.apps\ndeployments.apps\nreplicasets.apps\nstatefulsets.apps\n"
    assert kubectl.run("api-versions").stdout == (
        "admissionregistration.k8s.io/v1\napiextensions.k8s.io/v1\napiregistration.k8s.io/v1\napps/v1\nauthentication.k8s.io/v1\nauthorization.k8s.io/v1\nautoscaling/v1\nautoscaling/v2\nbatch/v1\ncertificates.k8s.io/v1\ncoordination.k8s.io/v1\ndiscovery.k8s.io/v1\nevents.k8s.io/v1\nflowcontrol.apiserver.k8s.io/v1\nmetrics.k8s.io/v1beta1\nnetworking.k8s.io/v1\npolicy/v1\nrbac.authorization.k8s.io/v1\nscheduling.k8s.io/v1\nstorage.k8s.io/v1\nv1\n"
    )


def test_version_reports_v1_32_and_cluster_info_lists_cluster_services(kubectl, apiserver, core):
    from k8py import __version__

    version = kubectl.run("version")
    assert version.stdout == (
        "Client Version: v1.32.4-dispatcher\n"
        "Kustomize Version: v5.5.0\n"
        f"Server Version: v1.32.0-k8py.{__version__}\n"
    )
    assert version.stderr == ""
    core.create_namespaced_service(
        "kube-system",
        {
            "metadata": {"name": "kube-dns", "labels": {"kubernetes.io/cluster-service": "true"}},
            "spec": {"selector": {"k8s-app": "kube-dns"}, "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}]},
        },
    )
    url = apiserver.url
    info = kubectl.run("cluster-info").stdout
    assert info == (
        f"Kubernetes control plane is running at {url}\n"
        f"kube-dns is running at {url}/api/v1/namespaces/kube-system/services/kube-dns:dns/proxy\n"
        "\n"
        "To further debug and diagnose cluster problems, use 'kubectl cluster-info dump'.\n"
    )
