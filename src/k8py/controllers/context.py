"""ControllerContext: everything a controller is given when it is built.

kube-controller-manager hands each controller's constructor a
``ControllerContext`` with the client, the *shared* informer factory and the
component options; this is the same. The rules:

- a controller asks ``ctx.informers`` for informers and listers and never
  builds its own, so that every controller watching pods shares one watch and
  one cache; the manager starts the factory after every controller has been
  built (so informers a controller asks for exist before the start) and each
  controller waits for the caches it reads before its workers run;
- events go through ``ctx.recorder(component)``, one broadcaster for the
  process (bounded, advisory: recording never blocks a sync);
- time comes from ``ctx.clock`` (a :class:`~k8py.client.clock.FakeClock` in
  unit tests) and work queues are built by :meth:`ControllerContext.new_queue`,
  which attaches the process's metrics provider and the clock;
- options are plain values in :class:`ControllerOptions`; a controller reads
  ``ctx.options.concurrent_syncs(name)`` for its worker count and its own
  fields for the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from k8py.client.clock import Clock, RealClock
from k8py.client.event_recorder import EventBroadcaster, EventRecorder
from k8py.client.informer_factory import InformerFactory
from k8py.client.metrics import MetricsProvider, default_metrics_provider
from k8py.client.rate_limiters import RateLimiter
from k8py.client.rate_limiting_queue import RateLimitingQueue
from k8py.client.rest import RestClient

__all__ = ["ControllerContext", "ControllerOptions", "DEFAULT_CONCURRENT_SYNCS"]

DEFAULT_CONCURRENT_SYNCS: dict[str, int] = {
    # kube-controller-manager's defaults (--concurrent-<name>-syncs)
    "replicaset": 5,
    "replicationcontroller": 5,
    "deployment": 5,
    "job": 5,
    "cronjob": 5,
    "daemonset": 2,
    "statefulset": 5,
    "garbagecollector": 20,
    "namespace": 10,
    "serviceaccount": 5,
    "ttl-after-finished": 5,
    "endpoint": 5,
    "endpointslice": 5,
    "endpointslicemirroring": 5,
}


@dataclass
class ControllerOptions:
    """Component options (flags of ``k8py controller-manager``)."""

    concurrent: dict[str, int] = field(default_factory=dict)
    """Per-controller worker counts overriding :data:`DEFAULT_CONCURRENT_SYNCS`."""
    terminated_pod_gc_threshold: int = 12_500
    pod_gc_period: float = 20.0
    """Seconds between PodGC passes (upstream: 20 s)."""
    pod_gc_quarantine: float = 40.0
    """Seconds a pod's node must stay missing before PodGC deletes the pod (upstream: 40 s)."""
    cluster_cidr: str = "127.64.0.0/10"
    node_cidr_mask_size: int = 24
    namespace_sync_period: float = 300.0
    """Seconds between re-checks of a namespace still being deleted."""
    gc_discovery_period: float = 30.0
    """Seconds between the garbage collector's discovery of served resources."""
    node_monitor_period: float = 5.0
    """Seconds between the node lifecycle controller's health checks (upstream: 5 s)."""
    node_monitor_grace_period: float = 50.0
    """Seconds a node may go without a heartbeat (Lease or status) before it is Unknown (upstream v1.32: 50 s)."""
    node_startup_grace_period: float = 60.0
    """The same for a node that has never posted Ready (upstream: 60 s)."""
    service_account_private_key_file: str = ""
    """``--service-account-private-key-file``: signs legacy Secret tokens (the serviceaccount-token controller runs only with it)."""
    root_ca_file: str = ""
    """``--root-ca-file``: the CA bundle put in token Secrets and in every namespace's kube-root-ca.crt ConfigMap."""
    cluster_signing_cert_file: str = ""
    cluster_signing_key_file: str = ""
    """``--cluster-signing-cert-file`` / ``-key-file``: the CA the csrsigning controller signs with."""
    cluster_signing_duration: float = 365 * 24 * 3600.0
    """``--cluster-signing-duration``: the longest a signed certificate lives (upstream: 8760h)."""
    use_service_account_credentials: bool = False
    """``--use-service-account-credentials``: each controller writes as its own kube-system service account."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Free-form settings for controllers that need more (tests, later issues)."""

    def concurrent_syncs(self, name: str) -> int:
        return self.concurrent.get(name) or DEFAULT_CONCURRENT_SYNCS.get(name, 1)


@dataclass
class ControllerContext:
    """What every controller factory receives; see the module docstring."""

    client: RestClient
    informers: InformerFactory
    broadcaster: EventBroadcaster
    clock: Clock = field(default_factory=RealClock)
    options: ControllerOptions = field(default_factory=ControllerOptions)
    metrics_provider: MetricsProvider | None = None
    """``None``: the process default (set by the manager to a Prometheus provider)."""
    registry: Any = None
    """The manager's Prometheus registry (its ``/metrics``), for a controller's own metrics; ``None`` outside a manager."""

    def recorder(self, component: str) -> EventRecorder:
        """An event recorder whose Events carry ``source.component = component``."""
        return self.broadcaster.new_recorder(component)

    def new_queue(self, name: str, *, rate_limiter: RateLimiter | None = None) -> RateLimitingQueue[Any]:
        """A rate-limited work queue named ``name`` (its ``workqueue_*`` metrics label)."""
        provider = self.metrics_provider if self.metrics_provider is not None else default_metrics_provider()
        return RateLimitingQueue(name=name, clock=self.clock, rate_limiter=rate_limiter, metrics_provider=provider)
