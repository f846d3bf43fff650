"""``k8py``: the command line. Entry points only wire components together.

Commands:

- ``k8py up``: the whole cluster in one command (API server, controller
  manager, scheduler, kubelets, each its own supervised process, see
  ``k8py.cluster``), writing a kubeconfig for kubectl; ``k8py down`` stops it,
  ``k8py status`` shows it; ``k8py flow`` prints its list-watch flow (``--trace``);
- ``k8py apiserver``: the API server alone, on the embedded store
  (``--data-dir``) or on etcd (``--etcd-servers``);
- ``k8py etcd``: run a local etcd for k8py;
- ``k8py migrate``: copy a cluster's objects between stores;
- ``k8py controller-manager``: the controllers (see ``k8py.controllers``);
- ``k8py scheduler``: the scheduler, against any cluster's API server;
- ``k8py kubelet``: the node agent (process or simulated runtime);
- ``k8py proxy``: kube-proxy for one node; ``k8py dns``: the cluster DNS;
- ``k8py containerd``: Debian's containerd for one node, as ``k8py up --runtime containerd`` runs it;
- ``k8py zygote``: what ``k8py up`` forks the components from (``k8py.cli.zygote``).
"""

from __future__ import annotations

import argparse
import functools
import sys

from k8py import __version__
from k8py.cli import apiserver as apiserver_command
from k8py.cli import containerd as containerd_command
from k8py.cli import controller_manager as controller_manager_command
from k8py.cli import down as down_command
from k8py.cli import etcd as etcd_command
from k8py.cli import flow as flow_command
from k8py.cli import kubelet as kubelet_command
from k8py.cli import migrate as migrate_command
from k8py.cli import proxy as proxy_command
from k8py.cli import scheduler as scheduler_command
from k8py.cli import up as up_command
from k8py.cli.log_format import configure_logging
from k8py.cli.process_tuning import tune_process

__all__ = ["main", "build_parser", "shared_parser"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="k8py", description="A Kubernetes-compatible cluster written in Python.")
    parser.add_argument("--version", action="version", version=f"k8py {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    up_command.add_parsers(sub)
    flow_command.add_parser(sub)
    apiserver_command.add_parser(sub)
    etcd_command.add_parser(sub)
    controller_manager_command.add_parser(sub)
    migrate_command.add_parser(sub)
    scheduler_command.add_parser(sub)
    kubelet_command.add_parser(sub)
    proxy_command.add_parsers(sub)
    containerd_command.add_parser(sub)
    zygote = sub.add_parser("zygote", help="(used by k8py up) import k8py once and fork each component from it")
    zygote.add_argument("--socket", required=True, help="the Unix socket the supervisor asks for forks on")
    return parser


@functools.cache
def shared_parser() -> argparse.ArgumentParser:
    """The parser ``main`` uses, built once per process (parsing leaves it as it was):
    ``k8py zygote`` builds it before it forks, so no component builds its own."""
    return build_parser()


def main(argv: list[str] | None = None) -> int:
    tune_process()
    args = shared_parser().parse_args(argv)
    configure_logging(getattr(args, "log_level", "WARNING"))
    if args.command == "up":
        return up_command.run_up(args)
    if args.command == "down":
        return down_command.run_down(args)
    if args.command == "status":
        return up_command.run_status(args)
    if args.command == "flow":
        return flow_command.run(args)
    if args.command == "apiserver":
        return apiserver_command.run(args)
    if args.command == "etcd":
        return etcd_command.run(args)
    if args.command == "migrate":
        return migrate_command.run(args)
    if args.command == "controller-manager":
        return controller_manager_command.run(args)
    if args.command == "scheduler":
        return scheduler_command.run(args)
    if args.command == "kubelet":
        return kubelet_command.run(args)
    if args.command == "proxy":
        return proxy_command.run_proxy(args)
    if args.command == "dns":
        return proxy_command.run_dns(args)
    if args.command == "containerd":
        return containerd_command.run(args)
    if args.command == "zygote":
        from k8py.cli.zygote import serve

        return serve(args.socket)
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
