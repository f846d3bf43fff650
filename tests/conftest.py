"""Fixtures shared by every test: real API servers on free loopback ports.

``apiserver`` runs every test that uses it twice: on the embedded SQLite
store and on a real etcd (the ``etcd`` variants carry the ``etcd`` mark, so
``-m "not etcd"`` leaves them out on a machine without etcd).
"""

from __future__ import annotations

import os
import signal
from typing import Iterator

import pytest

from tests.support.etcd import fresh_prefix, session_etcd
from tests.support.kube import Kubectl, official_client
from tests.support.servers import ServerThread, sqlite_storage


def pytest_configure(config) -> None:
    """A SIGTERM ends the session as pytest's own exit does, so its atexit hooks run.

    The session's etcd (tests/support/etcd.py) is stopped and its data
    directory removed by atexit; Python's default SIGTERM dies without them
    and leaves etcd running (a ``timeout`` around pytest, or a worker stopped
    from outside, left one etcd behind each time). A process forked from this
    one (a multiprocessing pool) gets the default back at the fork, before any Python code
    runs in it: a child stuck in C (on a lock some thread held at the fork) must still die of
    SIGTERM, where a Python handler would never get to run."""
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return
    session_pid = os.getpid()

    def _exit_on_sigterm(signum: int, _frame: object) -> None:
        if os.getpid() != session_pid:
            os._exit(128 + signum)
        pytest.exit("terminated by SIGTERM", returncode=128 + signum)

    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    os.register_at_fork(after_in_child=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL))


def _etcd_storage():  # type: ignore[no-untyped-def]
    from k8py.storage.etcd import EtcdStorage

    urls = session_etcd().client_urls
    prefix = fresh_prefix()
    return lambda: EtcdStorage(urls, prefix=prefix, compaction_interval=None)


@pytest.fixture(params=["sqlite", pytest.param("etcd", marks=pytest.mark.etcd)])
def backend(request) -> str:
    return request.param


@pytest.fixture
def apiserver(backend, tmp_path) -> Iterator[ServerThread]:
    """A real API server in a background thread, on the parametrized backend."""
    factory = sqlite_storage(str(tmp_path / "data")) if backend == "sqlite" else _etcd_storage()
    with ServerThread(factory, bookmark_interval=1.0) as server:
        yield server


@pytest.fixture
def k8s(apiserver):
    """The official kubernetes client's ApiClient pointed at ``apiserver``."""
    client = official_client(apiserver.url)
    yield client
    client.close()
    client.rest_client.pool_manager.clear()  # close() leaves its keep-alive sockets open


@pytest.fixture
def kubectl(apiserver, tmp_path) -> Kubectl:
    return Kubectl(apiserver.url, str(tmp_path / "home"))


pytest_plugins = ["tests.support.skip_policy"]  # the run fails on a skip without a listed reason


def pytest_sessionstart(session) -> None:  # type: ignore[no-untyped-def]
    """In CI every test must run: a missing etcd or kubectl is an error, not a
    skip (found, and CI recognised, as ``scripts/test`` does: tests/support/tools.py)."""
    from tests.support.tools import in_ci, missing_tools

    missing = missing_tools()
    if in_ci() and missing:
        raise pytest.UsageError("CI must run every test, but these are missing: " + "; ".join(missing) + " (scripts/test installs etcd)")
