"""``k8py.cli.etcd``: running etcd for k8py, as a library and as ``k8py etcd``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from k8py.cli.etcd import ETCD_BINARY, start_etcd_cluster
from k8py.storage.etcd import EtcdStorage

pytestmark = [
    pytest.mark.etcd,
    pytest.mark.skipif(not os.path.exists(ETCD_BINARY), reason="etcd not installed"),
]

CLI = (
    "import argparse, sys\n"
    "from k8py.cli import etcd\n"
    "parser = argparse.ArgumentParser()\n"
    "etcd.add_parser(parser.add_subparsers())\n"
    "args = parser.parse_args(sys.argv[1:])\n"
    "sys.exit(args.func(args))\n"
)


async def test_a_restarted_member_keeps_acknowledged_writes_after_sigkill(tmp_path: Path) -> None:
    cluster = start_etcd_cluster(str(tmp_path))
    try:
        assert cluster.leader_index() == 0
        store = EtcdStorage(cluster.client_urls, compaction_interval=None, retry_timeout=10)
        await store.start()
        try:
            kv = await store.create("/registry/pods/default/web", b"durable")
            cluster.kill(0, signal.SIGKILL)
            assert not cluster.is_running(0)
            cluster.restart(0)
            assert await store.get("/registry/pods/default/web") == kv
        finally:
            await store.close()
    finally:
        cluster.stop()


def test_starting_the_same_data_directory_again_reuses_its_ports(tmp_path: Path) -> None:
    first = start_etcd_cluster(str(tmp_path))
    urls = first.client_urls
    first.stop()
    again = start_etcd_cluster(str(tmp_path))
    try:
        assert again.client_urls == urls
        with pytest.raises(ValueError):
            start_etcd_cluster(str(tmp_path), members=3)
    finally:
        again.stop()


def test_the_cli_prints_the_etcd_servers_value_and_stops_etcd_on_sigterm(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, "etcd", "--data-dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("--etcd-servers=http://127.0.0.1:")
        url = line.split("=", 1)[1]
        with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
            assert json.loads(resp.read())["health"] == "true"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        with pytest.raises(OSError):
            urllib.request.urlopen(f"{url}/health", timeout=1)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
