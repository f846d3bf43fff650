"""Real k8py API servers for tests.

- :class:`ServerThread` runs an :class:`~k8py.apiserver.server.APIServer` on its
  own event loop in a background thread of the test process, so synchronous
  clients (the official ``kubernetes`` client, ``kubectl`` via subprocess) can
  talk to it over real HTTP without blocking it.
- :class:`ServerProcess` runs ``python -m k8py apiserver`` as a child process
  (for crash and start-up tests): the real entry point, killable with SIGKILL.
  ``ServerProcess.on_etcd`` starts one on an etcd cluster; the last lines the
  process printed are kept in ``output`` for failure messages.

Both listen on a free loopback port picked at start.
"""

from __future__ import annotations

import asyncio
import collections
import os
import re
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Callable

from k8py.apiserver.server import APIServer, APIServerConfig
from k8py.cli.kubeconfig import write_kubeconfig
from k8py.storage import Storage

__all__ = ["ServerThread", "ServerProcess", "sqlite_storage"]


def sqlite_storage(data_dir: str, **kw: Any) -> Callable[[], Storage]:
    def make() -> Storage:
        from k8py.storage.sqlite import SqliteStorage

        os.makedirs(data_dir, exist_ok=True)
        return SqliteStorage(os.path.join(data_dir, "k8py.db"), **kw)

    return make


class ServerThread:
    def __init__(self, storage_factory: Callable[[], Storage], **config: Any) -> None:
        self._storage_factory = storage_factory
        # the kubernetes Endpoints are written once at start, not renewed every 10 s: tests that
        # check "nothing was written" by the store's revision need a quiet store (tests of the
        # reconciler pass an interval)
        config.setdefault("endpoint_reconciler_interval", 0.0)
        # plain HTTP on a free loopback port (the explicit insecure port): tests of
        # TLS and authentication pass secure_port=0 (and insecure_port=None)
        config.setdefault("secure_port", None)
        config.setdefault("insecure_port", 0)
        self._config = APIServerConfig(**config)
        self.loop = asyncio.new_event_loop()
        self.server: APIServer | None = None
        self._thread = threading.Thread(target=self._run, name="k8py-apiserver", daemon=True)
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._stop: asyncio.Event | None = None

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._main())
        finally:
            # close the loop's selector and wakeup pipe: a suite of a thousand
            # servers must not leave a thousand epoll fds (select() callers in
            # later tests break past fd 1024)
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.run_until_complete(self.loop.shutdown_default_executor())
            self.loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        try:
            self.server = APIServer(self._storage_factory(), self._config)
            await self.server.start()
        except BaseException as err:  # reported to the starting thread
            self._error = err
            self._started.set()
            return
        self._started.set()
        await self._stop.wait()
        await self.server.stop()

    def start(self) -> "ServerThread":
        self._thread.start()
        # generous: a loaded machine (the suite runs in parallel workers) can take many seconds
        if not self._started.wait(180):
            raise RuntimeError("the API server thread did not start within 180 s")
        if self._error is not None:
            raise self._error
        return self

    def stop(self) -> None:
        if self._stop is not None and self._thread.is_alive():
            self.loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(30)

    def call(self, coro: Any, timeout: float = 30) -> Any:
        """Run a coroutine on the server's loop (e.g. to reach its storage)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    @property
    def url(self) -> str:
        assert self.server is not None
        return self.server.url

    def write_kubeconfig(self, path: str) -> str:
        return write_kubeconfig(path, self.url)

    def __enter__(self) -> "ServerThread":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class ServerProcess:
    """``python -m k8py apiserver`` in a child process."""

    def __init__(self, data_dir: str, *extra_args: str, env: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.extra_args = extra_args
        self.env = env
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""
        self.ready_seconds = 0.0
        self.output: collections.deque[str] = collections.deque(maxlen=200)

    @classmethod
    def on_etcd(cls, data_dir: str, etcd_servers: str, prefix: str, *extra_args: str) -> "ServerProcess":
        """An API server on etcd (``--etcd-servers``, ``--etcd-prefix``); not started."""
        return cls(data_dir, "--etcd-servers", etcd_servers, "--etcd-prefix", prefix, *extra_args)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout: float = 30) -> "ServerProcess":
        started = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "k8py", "apiserver", "--data-dir", self.data_dir, "--port", "0", *self.extra_args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **(self.env or {})},
        )
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        lines = []
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            self.output.append(line)
            m = re.search(r"listening on (http://\S+)", line)
            if m:
                self.url = m.group(1)
                self.ready_seconds = time.perf_counter() - started
                threading.Thread(target=self._drain, daemon=True).start()
                return self
        raise RuntimeError("API server did not start:\n" + "".join(lines))

    def _drain(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(30)

    def stop(self) -> None:
        self.kill(signal.SIGTERM)

    def __enter__(self) -> "ServerProcess":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.kill()
