"""``k8py scheduler``: parse flags, load the kubeconfig and the configuration
file, and run :func:`k8py.scheduler.run` until SIGINT/SIGTERM."""

from __future__ import annotations

from k8py import __version__

import argparse
import asyncio
import signal
import sys
from typing import Any

from k8py.cli.process_tuning import tune_gc_for_caches

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser("scheduler", help="run the scheduler (binds pending pods to nodes)")
    p.add_argument("--kubeconfig", default=None, help="kubeconfig of the cluster (default: $KUBECONFIG or ~/.kube/config)")
    p.add_argument("--config", default=None, help="a KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) YAML file")
    p.add_argument("--leader-elect", action="store_true", default=None,
                   help="run only while holding the kube-system/kube-scheduler Lease (several replicas may run)")
    p.add_argument("--bind-address", default="127.0.0.1", help="address for /healthz, /readyz and /metrics (default: %(default)s)")
    p.add_argument("--secure-port", "--port", dest="port", type=int, default=0,
                   help="port for /healthz, /readyz and /metrics; 0 picks a free one (default: %(default)s)")
    p.add_argument("--identity", default="", help="this replica's name in the Lease (default: hostname_uuid)")
    p.add_argument("--no-events", action="store_true", help="do not write Scheduled/FailedScheduling Events")
    p.add_argument("--log-level", default="WARNING")


def _tune_gc() -> None:
    """The scheduler's caches hold every node and pod (at 5,000 nodes, a million
    objects or so), and every watch event decodes a few dozen new dicts: with
    CPython's default thresholds collections ran every few hundred pods and
    cost 15% of the scheduler's CPU (measured in bench/scheduler_bench.py),
    finding next to nothing (the scheduler makes few reference cycles). What
    exists at start-up is frozen out of collection, and collections run far
    less often, as the API server's."""
    tune_gc_for_caches()


def run(args: argparse.Namespace) -> int:
    from k8py.client.kubeconfig import load_kubeconfig
    from k8py.scheduler.app import LeadershipLost, SchedulerOptions
    from k8py.scheduler.app import run as run_scheduler
    from k8py.scheduler.profile import SchedulerConfig, load_config

    try:
        config = load_config(args.config) if args.config else SchedulerConfig()
    except ValueError as err:
        print(f"k8py scheduler: invalid configuration: {err}", file=sys.stderr)
        return 1
    leader_elect = config.leader_election.leader_elect if args.config and args.leader_elect is None else bool(args.leader_elect)
    try:
        client_config = load_kubeconfig(args.kubeconfig)
        client_config.user_agent = f"k8py-scheduler/{__version__}"  # who wrote it, in the API server's flow record
    except Exception as err:  # a missing or broken kubeconfig: say which and stop
        print(f"k8py scheduler: cannot load the kubeconfig: {err}. Pass --kubeconfig FILE.", file=sys.stderr)
        return 1
    options = SchedulerOptions(config=config, leader_elect=leader_elect, bind=args.bind_address, port=args.port,
                               identity=args.identity, events=not args.no_events)

    _tune_gc()

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)

        def serving(url: str) -> None:
            print(f"k8py scheduler: serving /healthz, /readyz and /metrics on {url}", flush=True)

        task = asyncio.create_task(run_scheduler(client_config, options, on_serving=serving), name="scheduler")
        stopping = asyncio.create_task(stop.wait(), name="wait-for-signal")
        await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
        for t in (task, stopping):
            t.cancel()
        await asyncio.wait({task, stopping})
        if task.done() and not task.cancelled() and task.exception() is not None:
            err = task.exception()
            if isinstance(err, LeadershipLost) or (isinstance(err, BaseExceptionGroup) and err.subgroup(LeadershipLost)):
                print("k8py scheduler: leaderelection lost", file=sys.stderr, flush=True)
                return 1
            raise err  # type: ignore[misc]
        print("k8py scheduler: stopped", flush=True)
        return 0

    return asyncio.run(main())
