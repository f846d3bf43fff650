"""One real etcd process for the whole test session, started on first use.

Each user takes its own key prefix (``/t-<random>/registry``), so tests on
the shared etcd never see each other's objects.

The etcd is stopped and its data directory removed at exit (atexit); a
watchdog process does the same if this process dies without running atexit
(an xdist worker that ends with ``os._exit``, a SIGKILL), so no etcd is ever
left running after the session.
"""

from __future__ import annotations

import atexit
import os
import shlex
import shutil
import subprocess
import tempfile
import uuid

from k8py.cli.etcd import EtcdCluster, start_etcd_cluster
from tests.support.tools import ETCD_MISSING, etcd_installed

__all__ = ["session_etcd", "fresh_prefix", "etcd_installed", "ETCD_MISSING"]

_clusters: list[EtcdCluster] = []


def session_etcd() -> EtcdCluster:
    if not _clusters:
        data_dir = tempfile.mkdtemp(prefix="k8py-etcd-")
        atexit.register(shutil.rmtree, data_dir, True)
        _clusters.append(start_etcd_cluster(data_dir))
        atexit.register(_clusters[0].stop)  # runs before the rmtree (LIFO)
        _watch_over(_clusters[0], data_dir)
    return _clusters[0]


def _watch_over(cluster: EtcdCluster, data_dir: str) -> None:
    """A watchdog that stops the etcd and removes its data once this process is gone."""
    pids = " ".join(str(m.process.pid) for m in cluster.members if m.process is not None)
    # a pid is signalled only while it is still this etcd (its command line names the data dir)
    ours = f"for p in {pids}; do grep -qF {shlex.quote(data_dir)} /proc/$p/cmdline 2>/dev/null && kill -$1 $p; done"
    script = (f"stop() {{ {ours}; }}; while kill -0 {os.getpid()} 2>/dev/null; do sleep 1; done; "
              f"stop TERM; sleep 2; stop KILL; rm -rf {shlex.quote(data_dir)}")
    subprocess.Popen(["sh", "-c", script], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True)


def fresh_prefix() -> str:
    return f"/t-{uuid.uuid4().hex[:12]}/registry"
