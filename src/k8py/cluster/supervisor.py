"""Run one cluster's component processes: start in order, restart with backoff, stop in reverse.

Order: the API server first, and once its ``/readyz`` answers, every other
component at once (measured: starting all at once gets the node Ready no
sooner on 2 cores, as the imports compete for the CPU, and delays the API
server by seconds); the API server is stopped last. The cluster is *ready*
when the API server is ready, every component's health endpoint has answered
once and every expected Node is ``Ready``.

Invariants:

- each component is one process in its own session (Ctrl-C in the
  terminal reaches the supervisor only, which stops the children in order),
  logging stdout and stderr to its file under ``DATA_DIR/logs``; with
  ``spec.zygote`` (the default) it is forked by ``k8py zygote``, started
  first (or adopted: ``k8py up`` forks it out of itself before it imports
  this module) and supervised like a component (:mod:`.zygote_client`), so
  that k8py is imported once rather than once per component, and the
  certificates are made while the zygote imports (:mod:`.pki_child`); a component the zygote
  cannot fork is started as its own interpreter instead. Once every component is healthy,
  before the cluster is said ready, the zygote retires (:meth:`ZygoteClient.retire`: it
  becomes a bare reaper of the components it forked, its pages they had all copied freed;
  state ``retired``, not restarted if it exits), and a component that exits from then on is
  started again as its own interpreter;
- a component that exits while the cluster is not stopping is started again
  after a backoff (``backoff_initial`` doubling to ``backoff_max``; reset once
  it has run ``backoff_reset`` seconds), and ``restarts`` counts it
  (:mod:`.component_process` runs each process; this module decides when);
- the API server exiting before it was ever ready is fatal (a port in use, a
  broken data directory): :class:`StartError` carries its log's tail;
- a node's container runtime (``containerd/<node>``, :attr:`ComponentSpec.early`)
  starts with the API server and is healthy before any kubelet starts;
- on stop: SIGTERM to the node and controller processes, then the API server,
  SIGKILL after ``stop_grace`` seconds, then :func:`~k8py.cluster.sweep.sweep`
  for the containers the kubelets started, and each node's containerd leftovers
  (:func:`~k8py.cluster.containerd_cleanup.cleanup`); the state then says ``stopped``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import ssl
import time
from typing import Any, Callable

from k8py.cluster import dns_address
from k8py.cluster.addresses import (
    DEFAULT_SERVICE_CIDR, all_ports, dns_ip, kubernetes_service_ip, pick_cluster_cidr, pick_service_cidr, service_cidr_for,
)
from k8py.cluster.bootstrap_objects import NODE_ROTATION_BINDING, ensure_node_certificate_rotation
from k8py.cluster.commands import component_specs, zygote_spec
from k8py.cluster.component_process import Backoff, ComponentProcess, terminate
from k8py.cluster.containerd import ContainerdLayout
from k8py.cluster.containerd_cleanup import cleanup as containerd_cleanup
from k8py.cluster.pki import ClusterPKI
from k8py.cluster.pki_child import PKIError, ensure_in_child
from k8py.cluster.readiness import Prober, ready_nodes
from k8py.cluster.spec import SIMULATED_NODE, ClusterSpec, ComponentSpec
from k8py.cluster.state import read_state, write_state
from k8py.cluster.sweep import sweep
from k8py.cluster.zygote_client import AdoptedChild, ZygoteClient

__all__ = ["Supervisor", "StartError", "log_tail", "NODE_ROTATION_BINDING"]

logger = logging.getLogger(__name__)


class StartError(RuntimeError):
    """The cluster cannot start; the message says why and where to look."""


def log_tail(path: str, lines: int = 15) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


class Supervisor:
    """See the module docstring. ``on_progress`` gets each progress line;
    ``zygote_pid``: the zygote, already started by the caller (a child of this
    process serving :func:`zygote_spec`'s socket), to supervise instead of
    starting one."""

    def __init__(self, spec: ClusterSpec, *, on_progress: Callable[[str], None] = lambda _m: None,
                 zygote_pid: int | None = None, backoff_initial: float = 0.5, backoff_max: float = 30.0, backoff_reset: float = 60.0,
                 stop_grace: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.spec = spec
        self._on_progress = on_progress
        self.backoff = Backoff(backoff_initial, backoff_max, backoff_reset)
        self.stop_grace = stop_grace
        self._clock = clock
        self._t0 = clock()
        previous = read_state(spec.data_dir) or {}
        #: the pod and Service ranges, fixed at the first start (Nodes' podCIDRs and
        #: Services' cluster IPs come from them; a cluster from before serviceCIDR was
        #: recorded keeps the API server's default range)
        self.cluster_cidr = previous.get("clusterCIDR") or pick_cluster_cidr(spec)
        if spec.pods_in_netns:
            self.service_cidr = service_cidr_for(self.cluster_cidr)
        else:
            self.service_cidr = previous.get("serviceCIDR") or (DEFAULT_SERVICE_CIDR if previous else pick_service_cidr(spec))
        self.ports = all_ports(spec, previous.get("ports"), service_cidr=self.service_cidr)
        self.components = [ComponentProcess(c) for c in component_specs(spec, self.ports, cluster_cidr=self.cluster_cidr,
                                                                         service_cidr=self.service_cidr)]
        self.zygote = ComponentProcess(zygote_spec(spec)) if spec.zygote else None
        self._early_zygote = zygote_pid
        self._zygote_client: ZygoteClient | None = None
        self.ready = asyncio.Event()
        self.timings: dict[str, float] = {}
        self._stopping = False
        self._progress: list[str] = []
        host = "127.0.0.1" if spec.bind in ("0.0.0.0", "::") else spec.bind
        self.api_url = f"https://{host}:{self.ports['apiserver']}"
        self.pki = ClusterPKI(spec.data_dir)
        self._admin_tls: ssl.SSLContext | None = None

    # -- state and progress -------------------------------------------------------

    def elapsed(self) -> float:
        return self._clock() - self._t0

    def progress(self, message: str) -> None:
        line = f"[{self.elapsed():5.2f}s] {message}"
        self._progress = (self._progress + [line])[-100:]
        self._on_progress(line)
        self._write_state()

    def _write_state(self, *, stopped: bool = False) -> None:
        state: dict[str, Any] = {
            "pid": os.getpid(), "api": self.api_url, "kubeconfig": self.spec.kubeconfig, "dataDir": self.spec.data_dir,
            "ports": self.ports, "clusterCIDR": self.cluster_cidr, "serviceCIDR": self.service_cidr, "ready": self.ready.is_set(), "stopped": stopped, "timings": self.timings,
            "expectedNodes": self.spec.expected_nodes, "progress": self._progress,
            # a containerd k8py did not start: k8py down removes this cluster's pods from it
            "containerRuntimeEndpoint": self.spec.container_runtime_endpoint, "nodes": self.spec.node_names(),
            "components": {r.spec.name: {"pid": r.pid, "state": r.state,
                                         "restarts": r.restarts, "log": r.spec.log, "health": r.spec.health}
                           for r in self._all()},
        }
        write_state(self.spec.data_dir, state)

    # -- processes ----------------------------------------------------------------

    def _all(self) -> list[ComponentProcess]:
        return [*([self.zygote] if self.zygote is not None else []), *self.components]

    async def _spawn(self, r: ComponentProcess) -> None:
        await r.spawn(None if r is self.zygote else self._zygote_client, self._clock)
        self._write_state()

    def _start(self, r: ComponentProcess) -> None:
        """Supervise ``r`` (already spawned): restarts, and its first health answer."""
        def fatal() -> bool:  # the API server failing before it was ever ready: nothing to restart into
            return not r.healthy and r.spec.name == "apiserver" and not self.ready.is_set()

        async def respawn() -> None:
            await self._spawn(r)
            asyncio.create_task(self._watch_health(r), name=f"health-{r.spec.name}")

        def on_exit(code: int, delay: float) -> None:
            self.progress(f"{r.spec.name} exited with code {code}; restarting in {delay:.1f}s (log: {r.spec.log})")

        def stopping() -> bool:  # (a retired zygote that exits is not started again: nothing is forked any more)
            return self._stopping or r.state == "retired"

        r.task = asyncio.create_task(
            r.keep_running(backoff=self.backoff, clock=self._clock, stopping=stopping, fatal=fatal,
                           respawn=respawn, on_exit=on_exit),
            name=f"supervise-{r.spec.name}")
        asyncio.create_task(self._watch_health(r), name=f"health-{r.spec.name}")

    async def _watch_health(self, r: ComponentProcess) -> None:
        if not r.spec.health:  # up once started (the zygote: before there is a certificate to probe with)
            r.healthy, r.state = True, "running"
            self.progress(f"{r.spec.name} started (pid {r.proc.pid if r.proc else '?'})")
            return
        prober = self._prober()
        try:
            if await r.wait_healthy(prober, lambda: self._stopping):
                self.timings.setdefault(r.spec.name, round(self.elapsed(), 3))
                self.progress(f"{r.spec.name} up (pid {r.proc.pid})"  # type: ignore[union-attr]
                              + (f" at {r.spec.health.rsplit('/', 1)[0]}" if r.spec.name.startswith("apiserver") else ""))
        finally:
            prober.close()

    def _prober(self) -> Prober:
        """HTTP(S) as the cluster admin, trusting the cluster CA (health checks, Node readiness)."""
        if self._admin_tls is None:
            self._admin_tls = self.pki.client_ssl_context()
        return Prober(self._admin_tls)

    # -- the cluster --------------------------------------------------------------

    async def start(self, timeout: float = 120.0) -> None:
        """Start everything and return once the cluster is ready; raises
        :class:`StartError` (after stopping what started) if it cannot be."""
        os.makedirs(self.spec.log_dir, exist_ok=True)
        self.progress(f"starting k8py in {self.spec.data_dir} (logs in {self.spec.log_dir})")
        # the certificates, and every kubeconfig written now, so that no
        # component ever reads an old one (a resumed cluster on a new port)
        # (made while the zygote imports: the API server waits for both)
        await self._launch_zygote()
        await self._make_pki()
        await self._await_zygote()
        api, *rest = self.components
        early = [r for r in rest if r.spec.early]  # the nodes' runtimes: they need no API server
        for r in early:
            await self._spawn(r)
            self._start(r)
        await self._spawn(api)
        self._start(api)
        deadline = self._clock() + timeout
        while not api.healthy:
            if api.proc is not None and api.proc.returncode is not None and api.state == "failed":
                raise StartError(f"the API server exited with code {api.proc.returncode} before it was ready. "
                                 f"Its log ({api.spec.log}) ends:\n{log_tail(api.spec.log)}")
            self._check_deadline(deadline, "the API server to be ready", api.spec)
            await asyncio.sleep(0.01)
        prober = self._prober()
        try:
            warning = await ensure_node_certificate_rotation(prober, self.api_url)
        finally:
            prober.close()
        if warning:
            self.progress(warning)
        while not all(r.healthy for r in early):  # a kubelet started before its runtime would only exit
            self._check_deadline(deadline, "the nodes' container runtimes", next(r.spec for r in early if not r.healthy))
            await asyncio.sleep(0.01)
        if self.spec.dns and self.spec.pods_in_netns:
            await asyncio.to_thread(dns_address.ensure, self.spec.data_dir, dns_ip(self.service_cidr))
        for r in rest:
            if r.spec.early:
                continue
            await self._spawn(r)
            self._start(r)
        await self._wait_nodes(deadline)
        while not all(r.healthy for r in self.components):
            self._check_deadline(deadline, "every component to be healthy", next(r.spec for r in self.components if not r.healthy))
            await asyncio.sleep(0.02)
        await self._retire_zygote()
        self.ready.set()
        self.timings["ready"] = round(self.elapsed(), 3)
        self.progress(f"cluster ready in {self.elapsed():.2f}s")

    async def _make_pki(self) -> None:
        """:meth:`ClusterPKI.ensure` in a child forked for it (:mod:`.pki_child`)."""
        try:
            await ensure_in_child(self.pki, api_url=self.api_url, bind=self.spec.bind,
                                  service_ip=kubernetes_service_ip(self.service_cidr), nodes=self.spec.certificate_nodes(),
                                  simulated=SIMULATED_NODE if self.spec.simulated_nodes else "")
        except PKIError as err:
            raise StartError(f"could not make the cluster's certificates and kubeconfigs in {self.pki.dir}: {err}") from None

    async def _launch_zygote(self) -> None:
        zygote = self.zygote
        if zygote is None:
            return
        if self._early_zygote is not None:
            zygote.proc, zygote.started_at, zygote.state = AdoptedChild(self._early_zygote), self._clock(), "starting"
            self._write_state()
        else:
            await self._spawn(zygote)
        self._start(zygote)

    async def _await_zygote(self) -> None:
        zygote = self.zygote
        if zygote is None:
            return
        client = ZygoteClient(zygote.spec.argv[-1])
        if await client.wait_ready(15.0, alive=zygote.alive):
            self._zygote_client = client
        else:
            self.progress(f"the zygote did not start (log: {zygote.spec.log}); starting each component as its own process")

    async def _retire_zygote(self) -> None:
        """Every component is forked: the zygote becomes a bare reaper of its
        children (its pages that they all copied were its alone), and a component
        that exits from now on is started again as its own interpreter."""
        client, zygote = self._zygote_client, self.zygote
        if client is None or zygote is None:
            return
        self._zygote_client = None
        if await client.retire():
            zygote.state = "retired"
            self._write_state()
        else:  # (restarting, or still preloading after a restart of its own): it stays and forks
            self._zygote_client = client
            logger.warning("the zygote did not retire", extra={"log": zygote.spec.log})

    def _check_deadline(self, deadline: float, what: str, spec: ComponentSpec) -> None:
        if self._clock() > deadline:
            raise StartError(f"timed out waiting for {what}. The log of {spec.name} ({spec.log}) ends:\n{log_tail(spec.log)}")

    async def _wait_nodes(self, deadline: float) -> None:
        expected = self.spec.expected_nodes
        seen: set[str] = set()
        prober = self._prober()
        try:
            while len(seen) < expected:
                names = await ready_nodes(prober, self.api_url) or []
                fresh = [n for n in names if n not in seen]
                seen.update(names)
                if fresh and expected <= 5:
                    for name in fresh:
                        self.progress(f"node {name} Ready")
                elif fresh:
                    self.progress(f"{len(seen)}/{expected} nodes Ready")
                if len(seen) >= expected:
                    break
                kubelets = [r.spec for r in self.components if r.spec.name.startswith("kubelet/")]
                self._check_deadline(deadline, f"{expected} nodes to be Ready ({len(seen)} are)", kubelets[0] if kubelets else self.components[0].spec)
                # each poll lists every Node: at kwok's 5,000 (some 20 MB) once a second, not 20 times
                await asyncio.sleep(min(max(0.05, expected / 5000), 2.0))
        finally:
            prober.close()
        self.timings["nodesReady"] = round(self.elapsed(), 3)

    async def wait_stopped_components(self) -> None:
        """Returns only if the API server failed for good (supervision ended)."""
        api = self.components[0]
        if api.task is not None:
            await api.task

    async def stop(self) -> None:
        """Stop every component (see the module docstring); idempotent."""
        if self._stopping:
            return
        self._stopping = True
        self.progress("stopping")
        await terminate([r for r in self.components if not r.spec.name.startswith("apiserver")], self.stop_grace)
        await terminate([r for r in self.components if r.spec.name.startswith("apiserver")], self.stop_grace)
        if self.zygote is not None:
            await terminate([self.zygote], self.stop_grace)
        for r in self._all():
            if r.task is not None:
                r.task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await r.task
            r.state = "stopped"
        left = await asyncio.to_thread(sweep, self.spec.data_dir)
        await asyncio.to_thread(dns_address.remove, self.spec.data_dir)
        if self.spec.runs_containerd:  # the shims and their containers outlive containerd: they go now
            for node in self.spec.node_names():
                removed = await asyncio.to_thread(containerd_cleanup, ContainerdLayout.for_node(self.spec.data_dir, node))
                if removed:
                    self.progress(f"removed the containerd state of {node}: {', '.join(removed)}")
        self.progress(f"stopped (and {len(left)} container processes)" if left else "stopped")
        self._write_state(stopped=True)
