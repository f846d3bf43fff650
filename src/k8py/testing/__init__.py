"""k8py as a test fixture: a whole cluster in a temp directory, for pytest or any test runner.

The pytest plugin (entry point ``pytest11``, this module) adds:

- ``k8py_cluster`` (session scope): a running :class:`Cluster` — its
  ``kubeconfig`` path, API ``url``, a ``kubectl(...)`` helper and ready-made
  clients (``kubernetes_client`` for the official ``kubernetes`` package,
  ``lightkube_client``, ``kr8s_api``) when those packages are installed;
- ``k8py_namespace`` (function scope): a fresh namespace, deleted after the test;
- options ``--k8py-nodes N``, ``--k8py-simulated-nodes N`` and
  ``--k8py-keep-cluster`` (keep the cluster running after the session, in
  ``.k8py-pytest`` under the rootdir, and reuse it in the next session).

Installed, the plugin is loaded into every pytest session of the
environment, so it is inert unless used: it adds options and fixtures,
no hooks, and imports nothing heavy until a fixture runs.

``Cluster`` is also a context manager, sync and async, for other runners::

    with Cluster(nodes=1) as cluster:
        cluster.kubectl("create", "deployment", "web", "--image=nginx")
"""

from __future__ import annotations

from k8py.testing.cluster import Cluster, ClusterStartError

__all__ = ["Cluster", "ClusterStartError"]

try:  # the pytest plugin, when pytest is there (Cluster alone works without it)
    from k8py.testing.plugin import k8py_cluster, k8py_namespace, pytest_addoption  # noqa: F401
except ImportError:  # pragma: no cover - pytest not installed
    pass
