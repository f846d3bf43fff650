"""``k8py flow``: print the list-watch flow an API server recorded (``--trace``).

Reads ``GET /debug/flow`` (see :mod:`k8py.apiserver.flow`) of the cluster in
``--data-dir`` (or ``--server URL``), filters it and prints one line per
record — a write as ``who verb resource ns/name rv``, a watch event sent as
``→ watcher TYPE resource ns/name rv`` — or, with ``--output json``, the
records themselves as JSON lines. ``--follow`` keeps printing as the
cluster works. Lease renewals are left out unless ``--resource leases``
asks for them (they are every node's heartbeat, not part of any flow).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request
from typing import Any, Iterator

from k8py.cli.up import DEFAULT_DATA_DIR

__all__ = ["add_parser", "run", "matches"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser("flow", help="print the list-watch flow: who wrote what, which watcher was sent which event")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help="the cluster (k8py up --trace) to read (default: %(default)s)")
    p.add_argument("--server", default="", help="an API server URL instead of --data-dir (it must run with --trace)")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new records")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text", help="text, or JSON lines for tools")
    p.add_argument("-n", "--namespace", default="", help="only objects in this namespace")
    p.add_argument("--name", default="", help="only this object (NAME, or a prefix ending in '*': web-*)")
    p.add_argument("--component", default="", help="only these components (comma-separated: kubectl,scheduler,kubelet,...)")
    p.add_argument("--resource", default="", help="only these resources (comma-separated plurals: pods,replicasets,events)")
    p.add_argument("--kind", choices=("write", "watch", ""), default="", help="only writes, or only watch events")
    p.add_argument("--since", type=int, default=0, help="only records after this seq")


def _csv(value: str) -> set[str]:
    return {v.strip() for v in value.split(",") if v.strip()}


def matches(record: dict[str, Any], args: argparse.Namespace) -> bool:
    resources = _csv(args.resource)
    if resources:
        if record["resource"] not in resources:
            return False
    elif record["resource"] == "leases":
        return False
    if args.namespace and record.get("namespace") != args.namespace:
        return False
    if args.name:
        name = record.get("name", "")
        if args.name.endswith("*") and not name.startswith(args.name[:-1]):
            return False
        if not args.name.endswith("*") and name != args.name:
            return False
    components = _csv(args.component)
    if components and record.get("component") not in components:
        return False
    return not args.kind or record["kind"] == args.kind


def format_record(r: dict[str, Any]) -> str:
    stamp = time.strftime("%H:%M:%S", time.localtime(r["time"])) + f".{int(r['time'] * 1000) % 1000:03d}"
    obj = f"{r['namespace']}/{r['name']}" if r.get("namespace") else r.get("name", "")
    resource = r["resource"] + (f"/{r['subresource']}" if r.get("subresource") else "")
    summary = r.get("summary") or {}
    detail = " ".join(f"{k}={v}" for k, v in summary.items() if v not in ("", None, False))
    if r["kind"] == "write":
        line = f"{stamp}  {r['component']:<20} {r['verb']:<7} {resource} {obj}"
    else:
        line = f"{stamp}    → {r['watcher']:<22} {r['event']:<8} {resource} {obj}"
    return line + (f" rv={r['rv']}" if r.get("rv") else "") + (f"  {detail}" if detail else "")


def _server(args: argparse.Namespace) -> str:
    if args.server:
        return args.server.rstrip("/")
    from k8py.cluster.state import running_state

    data_dir = os.path.abspath(os.path.expanduser(args.data_dir))
    state = running_state(data_dir)
    if state is None:
        raise SystemExit(f"k8py flow: no cluster is running in {data_dir}; start one with `k8py up --trace --data-dir {data_dir}` "
                         f"or pass --server URL")
    return str(state["api"])


def _ssl_context(args: argparse.Namespace, server: str) -> Any:
    """As the cluster admin of ``--data-dir`` (k8py up's PKI) for an HTTPS server."""
    if not server.startswith("https://"):
        return None
    from k8py.cluster.pki import ClusterPKI

    pki = ClusterPKI(os.path.abspath(os.path.expanduser(args.data_dir)))
    return pki.client_ssl_context() if os.path.exists(pki.ca_file) else None


def _records(server: str, since: int, follow: bool, context: Any = None) -> Iterator[dict[str, Any]]:
    url = f"{server}/debug/flow?since={since}" + ("&follow=true" if follow else "")
    try:
        with urllib.request.urlopen(url, timeout=None if follow else 60, context=context) as response:
            for line in response:
                if line.strip():
                    yield json.loads(line)
    except urllib.error.HTTPError as err:
        try:
            message = json.loads(err.read()).get("message", str(err))
        except ValueError:
            message = str(err)
        raise SystemExit(f"k8py flow: {message}") from None
    except urllib.error.URLError as err:
        raise SystemExit(f"k8py flow: cannot reach the API server at {server}: {err.reason}") from None


def run(args: argparse.Namespace) -> int:
    server = _server(args)
    try:
        for record in _records(server, args.since, args.follow, _ssl_context(args, server)):
            if not matches(record, args):
                continue
            out = json.dumps(record, separators=(",", ":")) if args.output == "json" else format_record(record)
            print(out, flush=args.follow)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        sys.stderr.close()
    return 0
