"""The built-in resources as :class:`~k8py.client.resource.Resource` constants.

Use them directly (``await client.get(LEASES, "kube-system", "kube-scheduler")``)
or look resources up by kind, plural or short name through discovery when the
server may serve something else (custom resources).
"""

from __future__ import annotations

from k8py.client.resource import Resource

__all__ = [
    "NAMESPACES",
    "NODES",
    "PODS",
    "SERVICES",
    "ENDPOINTS",
    "CONFIGMAPS",
    "SECRETS",
    "SERVICE_ACCOUNTS",
    "CERTIFICATE_SIGNING_REQUESTS",
    "EVENTS",
    "CORE_EVENTS",
    "LEASES",
    "REPLICATION_CONTROLLERS",
    "DEPLOYMENTS",
    "REPLICASETS",
    "STATEFULSETS",
    "DAEMONSETS",
    "JOBS",
    "ENDPOINT_SLICES",
    "CUSTOM_RESOURCE_DEFINITIONS",
    "PRIORITY_CLASSES",
    "POD_DISRUPTION_BUDGETS",
    "RESOURCE_QUOTAS",
    "LIMIT_RANGES",
    "HORIZONTAL_POD_AUTOSCALERS",
    "POD_METRICS",
]

NAMESPACES = Resource("", "v1", "namespaces", False, "Namespace")
NODES = Resource("", "v1", "nodes", False, "Node")
PODS = Resource("", "v1", "pods", True, "Pod")
SERVICES = Resource("", "v1", "services", True, "Service")
ENDPOINTS = Resource("", "v1", "endpoints", True, "Endpoints")
CONFIGMAPS = Resource("", "v1", "configmaps", True, "ConfigMap")
SECRETS = Resource("", "v1", "secrets", True, "Secret")
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", True, "ServiceAccount")
CORE_EVENTS = Resource("", "v1", "events", True, "Event")
EVENTS = Resource("events.k8s.io", "v1", "events", True, "Event")
LEASES = Resource("coordination.k8s.io", "v1", "leases", True, "Lease")
REPLICATION_CONTROLLERS = Resource("", "v1", "replicationcontrollers", True, "ReplicationController")
DEPLOYMENTS = Resource("apps", "v1", "deployments", True, "Deployment")
REPLICASETS = Resource("apps", "v1", "replicasets", True, "ReplicaSet")
STATEFULSETS = Resource("apps", "v1", "statefulsets", True, "StatefulSet")
DAEMONSETS = Resource("apps", "v1", "daemonsets", True, "DaemonSet")
JOBS = Resource("batch", "v1", "jobs", True, "Job")
ENDPOINT_SLICES = Resource("discovery.k8s.io", "v1", "endpointslices", True, "EndpointSlice")
CUSTOM_RESOURCE_DEFINITIONS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", False, "CustomResourceDefinition"
)
PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", False, "PriorityClass")
POD_DISRUPTION_BUDGETS = Resource("policy", "v1", "poddisruptionbudgets", True, "PodDisruptionBudget")
RESOURCE_QUOTAS = Resource("", "v1", "resourcequotas", True, "ResourceQuota")
LIMIT_RANGES = Resource("", "v1", "limitranges", True, "LimitRange")
HORIZONTAL_POD_AUTOSCALERS = Resource("autoscaling", "v2", "horizontalpodautoscalers", True, "HorizontalPodAutoscaler")
CERTIFICATE_SIGNING_REQUESTS = Resource(
    "certificates.k8s.io", "v1", "certificatesigningrequests", False, "CertificateSigningRequest")
POD_METRICS = Resource("metrics.k8s.io", "v1beta1", "pods", True, "PodMetrics")
