"""One real etcd process for the whole test session, started on first use.

Each user takes its own key prefix (``/t-<random>/registry``), so tests on
the shared etcd never see each other's objects.
"""

from __future__ import annotations

import atexit
import os
import shutil
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
    return _clusters[0]


def fresh_prefix() -> str:
    return f"/t-{uuid.uuid4().hex[:12]}/registry"
