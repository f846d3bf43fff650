"""``k8py up`` and ``k8py status``: parse flags, wire the supervisor.

``k8py up`` runs the supervisor (:mod:`k8py.cluster.supervisor`) in this
process, prints progress, then how to use the cluster, and stops it on
Ctrl-C/SIGTERM. With ``--detach`` it starts the same command in the
background (its output in ``DATA_DIR/logs/supervisor.log``), follows its
progress through ``DATA_DIR/cluster.json`` and returns once the cluster is
ready. ``k8py down`` is :mod:`k8py.cli.down`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

__all__ = ["add_parsers", "run_up", "run_status", "DEFAULT_DATA_DIR"]

DEFAULT_DATA_DIR = os.path.join(os.path.expanduser("~"), ".k8py")


def add_parsers(sub: Any) -> None:
    up = sub.add_parser("up", help="start a whole cluster (API server, controller manager, scheduler, kubelet)")
    up.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help="the cluster's store, kubeconfig and logs (default: %(default)s)")
    up.add_argument("--config", default="", help="a cluster config file (YAML; see k8py.cluster.spec)")
    up.add_argument("--bind", default=None, help="API server address (default: 127.0.0.1)")
    up.add_argument("--port", type=int, default=None, help="API server port; 0 picks a free one (default: 6443)")
    up.add_argument("--nodes", type=int, default=None, help="kubelets on the process runtime, each its own node (default: 1)")
    up.add_argument("--simulated-nodes", type=int, default=None, help="more nodes on the simulated runtime, in one process")
    up.add_argument("--etcd-servers", default=None, help="comma-separated etcd URLs: the control plane on etcd")
    up.add_argument("--etcd-prefix", default=None, help="etcd key prefix (default: /registry)")
    up.add_argument("--apiservers", type=int, default=None, help="API servers on the etcd of --etcd-servers (default: 1)")
    up.add_argument("--trace", action="store_true", default=None, help="record the list-watch flow (read it with k8py flow)")
    up.add_argument("--no-proxy", dest="proxy", action="store_false", default=None, help="run no k8py proxy (Services' cluster IPs)")
    up.add_argument("--pod-network", choices=("loopback", "cni"), default=None,
                    help="cni (root): each pod its own network namespace (CNI bridge), Services through nftables (default: loopback)")
    up.add_argument("--runtime", choices=("process", "containerd"), default=None,
                    help="containerd (root): each node's pods on its own Debian containerd over CRI, in their own "
                         "network namespaces (default: process, k8py's process runtime)")
    up.add_argument("--container-runtime-endpoint", default=None,
                    help="with --runtime containerd: use the containerd at unix:///path.sock instead of starting one")
    up.add_argument("--no-dns", dest="dns", action="store_false", default=None, help="run no k8py dns")
    up.add_argument("--no-zygote", dest="zygote", action="store_false", default=None,
                    help="start each component as its own interpreter instead of forking it from k8py zygote")
    up.add_argument("--no-follow-flow", dest="follow_flow", action="store_false", default=True,
                    help="with --trace in the foreground: do not print the flow live (k8py flow reads it)")
    up.add_argument("--detach", action="store_true", help="return once the cluster is ready; stop it with k8py down")
    up.add_argument("--merge-kubeconfig", action="store_true", help="add a k8py context to ~/.kube/config (or $KUBECONFIG) and use it")
    up.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the cluster to be ready")
    up.add_argument("--log-level", default="WARNING")
    down = sub.add_parser("down", help="stop the cluster of a data directory")
    down.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    down.add_argument("--timeout", type=float, default=60.0)
    status = sub.add_parser("status", help="show a cluster's components, nodes and logs")
    status.add_argument("--data-dir", default=DEFAULT_DATA_DIR)


def _spec(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from k8py.cluster.spec import ClusterSpec, SpecError, load_config_file

    doc = load_config_file(args.config) if args.config else {}
    pick = lambda flag, key, default: flag if flag is not None else doc.get(key, default)  # noqa: E731
    etcd = args.etcd_servers.split(",") if args.etcd_servers else doc.get("etcdServers") or []
    spec = ClusterSpec(
        data_dir=os.path.abspath(os.path.expanduser(args.data_dir)),
        bind=pick(args.bind, "bind", "127.0.0.1"), port=int(pick(args.port, "port", 6443)),
        nodes=int(pick(args.nodes, "nodes", 1)), simulated_nodes=int(pick(args.simulated_nodes, "simulatedNodes", 0)),
        etcd_servers=[u.strip() for u in etcd if u.strip()], etcd_prefix=pick(args.etcd_prefix, "etcdPrefix", "/registry"),
        apiservers=int(pick(args.apiservers, "apiservers", 1)),
        trace=bool(pick(args.trace, "trace", False)),
        proxy=bool(pick(args.proxy, "proxy", True)), dns=bool(pick(args.dns, "dns", True)),
        zygote=bool(pick(args.zygote, "zygote", True)),
        pod_network=str(pick(args.pod_network, "podNetwork", "loopback")),
        runtime=str(pick(args.runtime, "runtime", "process")),
        container_runtime_endpoint=str(pick(args.container_runtime_endpoint, "containerRuntimeEndpoint", "") or ""),
        extra_args={k: [str(a) for a in v] for k, v in (doc.get("components") or {}).items()},
    )
    if spec.pod_network not in ("loopback", "cni"):
        raise SpecError(f"podNetwork must be loopback or cni, not {spec.pod_network!r}")
    if spec.pod_network == "cni" and os.geteuid() != 0:
        raise SpecError("--pod-network cni needs root (network namespaces, a bridge, nftables); run k8py up as root or drop it")
    _check_runtime(spec)
    if spec.nodes < 0 or spec.simulated_nodes < 0 or spec.expected_nodes == 0:
        raise SpecError("a cluster needs at least one node: --nodes N (N >= 1) or --simulated-nodes N")
    if spec.apiservers < 1 or (spec.apiservers > 1 and not spec.etcd_servers):
        raise SpecError("--apiservers N > 1 needs --etcd-servers: several API servers share one etcd (the embedded store is one process's)")
    return spec


def _check_runtime(spec: Any) -> None:
    from k8py.cluster.containerd import containerd_missing
    from k8py.cluster.spec import SpecError

    if spec.runtime not in ("process", "containerd"):
        raise SpecError(f"runtime must be process or containerd, not {spec.runtime!r}")
    if spec.container_runtime_endpoint and spec.runtime != "containerd":
        raise SpecError("--container-runtime-endpoint needs --runtime containerd")
    if spec.runtime != "containerd":
        return
    if spec.pod_network == "cni":
        raise SpecError("--runtime containerd networks pods through containerd's own CNI config: drop --pod-network cni")
    if spec.container_runtime_endpoint:
        if not spec.container_runtime_endpoint.startswith("unix:///"):
            raise SpecError(f"--container-runtime-endpoint {spec.container_runtime_endpoint!r}: expected "
                            "unix:///absolute/path/to/containerd.sock")
        if os.geteuid() != 0:
            raise SpecError("--runtime containerd needs root (the proxy's nftables rules, pods' cgroups): run k8py up as root")
        return
    why = containerd_missing()
    if why:
        raise SpecError(why)


def _print(line: str) -> None:
    print(line, flush=True)


def _usage(state_or_spec: Any, merged: str = "") -> None:
    kubeconfig = state_or_spec.kubeconfig if hasattr(state_or_spec, "kubeconfig") else state_or_spec["kubeconfig"]
    data_dir = os.path.dirname(kubeconfig)
    _print("")
    _print("Use it:" if not merged else f"Use it (context k8py merged into {merged}):")
    if not merged:
        _print(f"  export KUBECONFIG={kubeconfig}")
    _print("  kubectl get nodes")
    _print("  kubectl create deployment web --image=nginx && kubectl get pods -w")
    _print(f"Status: k8py status --data-dir {data_dir}    Stop: k8py down --data-dir {data_dir}")


def _merge(kubeconfig: str) -> str:
    from k8py.cli.kubeconfig import merge_into_user_kubeconfig

    return merge_into_user_kubeconfig(kubeconfig)


async def _supervise(args: argparse.Namespace, spec: Any, zygote: int | None = None) -> int:
    from k8py.cluster.supervisor import StartError, Supervisor

    supervisor = Supervisor(spec, on_progress=_print, zygote_pid=zygote)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    starting = asyncio.create_task(supervisor.start(timeout=args.timeout), name="cluster-start")
    stopping = asyncio.create_task(stop.wait(), name="wait-for-signal")
    try:
        await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if starting.done() and starting.exception() is not None:
            err = starting.exception()
            print(f"k8py up: {err}", file=sys.stderr, flush=True)
            return 1 if isinstance(err, StartError) else 2
        if stop.is_set():
            starting.cancel()
            return 130
        merged = _merge(spec.kubeconfig) if args.merge_kubeconfig else ""
        _usage(spec, merged)
        if sys.stdin is not None and sys.stdin.isatty():
            _print("(Ctrl-C stops the cluster)")
        api_gone = asyncio.create_task(supervisor.wait_stopped_components(), name="api-supervision")
        waits = {stopping, api_gone}
        if spec.trace and args.follow_flow:
            _print("The list-watch flow, live (k8py flow --help for filters):")
            waits.add(asyncio.create_task(_follow_flow(supervisor.api_url, supervisor.pki.client_ssl_context()), name="follow-flow"))
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for task in waits - {stopping}:
            task.cancel()
        return 0
    finally:
        stopping.cancel()
        if not starting.done():
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await starting
        await supervisor.stop()


async def _follow_flow(api_url: str, ssl_context: Any = None) -> None:
    """``k8py up --trace`` in the foreground: print the flow as it happens
    (what ``k8py flow --follow`` prints), leases left out."""
    import aiohttp

    from k8py.cli.flow import format_record

    seq = 0
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_read=None),
                                     connector=aiohttp.TCPConnector(ssl=ssl_context if ssl_context is not None else False)) as session:
        while True:
            try:
                async with session.get(f"{api_url}/debug/flow", params={"since": str(seq), "follow": "true"}) as response:
                    async for line in response.content:
                        if not line.strip():
                            continue
                        record = json.loads(line)
                        seq = record["seq"]
                        if record["resource"] != "leases":
                            _print(format_record(record))
            except (aiohttp.ClientError, OSError):
                await asyncio.sleep(1.0)  # the API server is restarting: resume where we were


def _detach(args: argparse.Namespace, spec: Any) -> int:
    from k8py.cluster.state import pid_alive, read_state, state_path

    os.makedirs(spec.log_dir, exist_ok=True)
    argv = ["up", "--data-dir", spec.data_dir, "--timeout", str(args.timeout), "--log-level", args.log_level, "--no-follow-flow"]
    for flag in ("config", "bind", "port", "nodes", "simulated_nodes", "etcd_servers", "etcd_prefix", "apiservers", "pod_network",
                 "runtime", "container_runtime_endpoint"):
        value = getattr(args, flag)
        if value not in (None, ""):
            argv += [f"--{flag.replace('_', '-')}", str(value)]
    for flag, on in (("--trace", args.trace), ("--no-proxy", args.proxy is False), ("--no-dns", args.dns is False),
                     ("--no-zygote", args.zygote is False)):
        if on:
            argv.append(flag)
    with contextlib.suppress(FileNotFoundError):  # the child's first write is then the one followed
        os.remove(state_path(spec.data_dir))
    log = open(os.path.join(spec.log_dir, "supervisor.log"), "ab")
    proc = subprocess.Popen([sys.executable, "-m", "k8py", *argv], stdin=subprocess.DEVNULL,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd="/")
    log.close()
    printed = 0
    deadline = time.monotonic() + args.timeout + 10
    while True:
        state = read_state(spec.data_dir) or {}
        mine = state.get("pid") == proc.pid
        lines = state.get("progress", []) if mine else []
        for line in lines[printed:]:
            _print(line)
        printed = max(printed, len(lines))
        if mine and state.get("ready"):
            break
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = open(os.path.join(spec.log_dir, "supervisor.log"), errors="replace").readlines()[-20:]
            print(f"k8py up: the cluster did not start. {os.path.join(spec.log_dir, 'supervisor.log')} ends:\n" + "".join(tail),
                  file=sys.stderr, flush=True)
            if pid_alive(proc.pid):
                proc.terminate()
            return 1
        time.sleep(0.02)
    merged = _merge(spec.kubeconfig) if args.merge_kubeconfig else ""
    _usage(spec, merged)
    return 0


def run_up(args: argparse.Namespace) -> int:
    from k8py.cli.down import cleanup_containerd, remove_pods_from_runtime
    from k8py.cluster.spec import SpecError
    from k8py.cluster.state import running_state

    try:
        spec = _spec(args)
    except SpecError as err:
        print(f"k8py up: {err}", file=sys.stderr)
        return 2
    running = running_state(spec.data_dir)
    if running:
        print(f"k8py up: a cluster is already running in {spec.data_dir} (supervisor pid {running['pid']}, API {running['api']}). "
              f"See it with `k8py status --data-dir {spec.data_dir}`, stop it with `k8py down --data-dir {spec.data_dir}`.",
              file=sys.stderr)
        return 1
    if args.detach:
        return _detach(args, spec)
    zygote = _fork_zygote(spec)
    try:
        code = asyncio.run(_supervise(args, spec, zygote))
    finally:
        if zygote is not None:  # the supervisor stopped it, unless it never got to adopt it
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(zygote, os.WNOHANG)[0] == 0:
                    os.kill(zygote, signal.SIGTERM)
                    os.waitpid(zygote, 0)
    from k8py.kubelet.node_cleanup import remove_empty_cgroups_under

    # the swept containers' cgroups, and their kubelets' trees at the machine's cgroup roots: empty now
    remove_empty_cgroups_under(os.path.join(spec.data_dir, "kubelet"))
    if spec.runs_containerd:
        cleanup_containerd(spec.data_dir)  # what the supervisor could not remove, and the machine's ip_forward
    elif spec.container_runtime_endpoint and os.geteuid() == 0:
        remove_pods_from_runtime(spec.data_dir, spec.container_runtime_endpoint, spec.node_names())
    return code


def _fork_zygote(spec: Any) -> int | None:
    """The zygote, forked out of this process before the supervisor is even
    imported (no thread, no event loop yet): its imports are what the API
    server waits for, and they then overlap the supervisor's own imports and
    the certificates it makes."""
    if not spec.zygote:
        return None
    from k8py.cli.zygote import fork_serve
    from k8py.cluster.commands import zygote_spec

    zygote = zygote_spec(spec)
    return fork_serve(zygote.argv[-1], zygote.log)


def run_status(args: argparse.Namespace) -> int:
    from k8py.cli.status import print_status

    return print_status(os.path.abspath(os.path.expanduser(args.data_dir)))
