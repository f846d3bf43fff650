"""``k8py scheduler`` as a component: the client, the Events broadcaster, the
scheduler, the health endpoints and (with ``leader_elect``) the Lease.

:func:`run` runs until cancelled. The informers start at once (a standby's
cache is warm when it takes over); the scheduling loop runs only while this
instance leads. Losing the lease ends :func:`run` with
:class:`LeadershipLost`, so the process exits and is restarted, as upstream.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import uuid
from dataclasses import dataclass
from typing import Callable

from k8py.client.config import ClientConfig
from k8py.client.event_series import SeriesEventBroadcaster
from k8py.client.leader_election import LeaderElector
from k8py.client.rate_limiters import BucketRateLimiter
from k8py.client.rest import RestClient
from k8py.scheduler.profile import SchedulerConfig
from k8py.scheduler.scheduler import Scheduler
from k8py.client.health_server import HealthServer

__all__ = ["run", "SchedulerOptions", "LeadershipLost"]

logger = logging.getLogger(__name__)

COMPONENT = "default-scheduler"


class LeadershipLost(Exception):
    def __str__(self) -> str:
        return "leaderelection lost"


@dataclass
class SchedulerOptions:
    config: SchedulerConfig
    leader_elect: bool = False
    bind: str = "127.0.0.1"
    port: int = 0
    identity: str = ""
    events: bool = True


async def run(client_config: ClientConfig, options: SchedulerOptions, *,
              on_serving: Callable[[str], None] | None = None) -> None:
    identity = options.identity or f"{socket.gethostname()}_{uuid.uuid4()}"
    async with RestClient(client_config) as client, RestClient(client_config) as event_client:
        # the Events' own client and token bucket, as upstream's event clientset (clientConnection
        # qps/burst): a write per Event, however many wait, never queues a bind behind them
        limiter = BucketRateLimiter(options.config.client_qps, options.config.client_burst)
        broadcaster = SeriesEventBroadcaster(event_client, limiter=limiter) if options.events else None
        recorder = broadcaster.new_recorder(COMPONENT, reporting_instance=f"{COMPONENT}-{identity}") if broadcaster else None
        scheduler = Scheduler(client, options.config, recorder=recorder)
        elector: LeaderElector | None = None

        def ready() -> str | None:
            if not scheduler.synced:
                return "informer-sync failed: caches not synced yet"
            if elector is not None and not elector.is_leader():
                return f"leaderElection failed: not the leader (the leader is {elector.leader or 'unknown'})"
            return None

        health = HealthServer(metrics=scheduler.metrics.render, ready=ready, bind=options.bind, port=options.port)
        await health.start()
        if on_serving is not None:
            on_serving(health.url)
        try:
            async with asyncio.TaskGroup() as group:
                if broadcaster is not None:
                    group.create_task(broadcaster.run(), name="scheduler-events")
                group.create_task(scheduler.run_informers(), name="scheduler-informers")
                await scheduler.wait_for_sync()
                if not options.leader_elect:
                    await scheduler.run_scheduling()
                    return
                le = options.config.leader_election
                elector = LeaderElector(
                    client, le.resource_namespace, le.resource_name, identity,
                    lease_duration=le.lease_duration, renew_deadline=le.renew_deadline, retry_period=le.retry_period,
                    on_started_leading=scheduler.run_scheduling,
                    on_new_leader=lambda who: logger.info("new leader elected", extra={"leader": who}),
                )
                print(f"k8py scheduler: {identity} waiting for the {le.resource_namespace}/{le.resource_name} lease", flush=True)
                await elector.run()
                raise LeadershipLost()
        finally:
            await health.stop()
