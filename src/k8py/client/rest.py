"""An async REST client for any resource of any Kubernetes API server.

Objects are JSON-shaped dicts in and out; the resource is named by a
:class:`~k8py.client.resource.Resource` (constants in
:mod:`k8py.client.resources`, or found through :attr:`RestClient.discovery`)::

    async with RestClient(load_kubeconfig()) as client:
        lease = await client.get(LEASES, "kube-system", "kube-scheduler")
        async for event in client.watch(PODS, "default", resource_version=rv):
            ...

Errors: a non-2xx answer raises the :class:`~k8py.api.errors.StatusError`
subclass of its ``Status`` body (``NotFound``, ``Conflict``, ``Expired``, ...;
a body that is not a Status is mapped by HTTP code). A failure below HTTP
raises :class:`~k8py.client.transport.TransportError` once retries are spent.

Retries (client-go ``rest.Request`` rules), with exponential backoff and
jitter, at most ``RetryPolicy.max_attempts`` tries:

- connection not established (``request_sent=False``): any verb;
- connection broken after sending, or 5xx: only ``GET`` (reads and watch
  starts): a POST/PUT/PATCH/DELETE whose outcome is unknown is never resent;
- 429, or a 5xx carrying ``Retry-After``: any verb, since the server says it
  did not act; the wait is at least ``Retry-After``.

Concurrency: one client is shared by all tasks of a loop; its transport keeps
one connection pool (:mod:`k8py.client.http1` for plain requests, aiohttp for
streams).
"""

from __future__ import annotations

import builtins
import logging
import random
from types import MappingProxyType
from typing import Any, AsyncIterator, Callable, Mapping

import orjson

from k8py.api.errors import Expired
from k8py.client.backoff import Backoff
from k8py.client.clock import Clock, RealClock
from k8py.client.config import ClientConfig
from k8py.client.discovery import Discovery
from k8py.client.resource import Resource
from k8py.client.rest_types import PatchType, RetryPolicy, error_from_response, retry_after
from k8py.client.http1 import Http1Transport
from k8py.client.transport import HTTPRequest, HTTPResponse, Transport, TransportError
from k8py.client.watch_stream import WatchStream

__all__ = ["RestClient", "PatchType", "RetryPolicy"]  # the last two live in rest_types

logger = logging.getLogger(__name__)

_JSON = "application/json"
# the headers of nearly every request, shared (transports only read a request's headers)
_ACCEPT_JSON: Mapping[str, str] = MappingProxyType({"Accept": _JSON})
_SEND_JSON: Mapping[str, str] = MappingProxyType({"Accept": _JSON, "Content-Type": _JSON})


def _selector_params(label_selector: str | None, field_selector: str | None) -> list[tuple[str, str]]:
    params = []
    if label_selector:
        params.append(("labelSelector", label_selector))
    if field_selector:
        params.append(("fieldSelector", field_selector))
    return params


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


class RestClient:
    """See the module docstring."""

    def __init__(
        self,
        config: ClientConfig,
        *,
        transport: Transport | None = None,
        retry: RetryPolicy | None = None,
        clock: Clock | None = None,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self.config = config
        self.transport: Transport = transport if transport is not None else Http1Transport(config)
        self.retry = retry if retry is not None else RetryPolicy()
        self._clock: Clock = clock if clock is not None else RealClock()
        self._rng = rng
        self._discovery: Discovery | None = None

    async def close(self) -> None:
        await self.transport.close()

    async def __aenter__(self) -> RestClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def discovery(self) -> Discovery:
        """The client's :class:`~k8py.client.discovery.Discovery` (cached)."""
        if self._discovery is None:
            self._discovery = Discovery(self, clock=self._clock)
        return self._discovery

    # -- the one request path ------------------------------------------------------

    async def send(
        self,
        method: str,
        path: str,
        *,
        params: builtins.list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = _JSON,
        stream: bool = False,
        timeout: float | None = 60.0,
    ) -> HTTPResponse:
        """Send with retries; return a 2xx response or raise. ``stream`` leaves the body unread."""
        data = None if body is None else (body if isinstance(body, bytes) else orjson.dumps(body))
        if data is None:
            headers = _ACCEPT_JSON
        elif content_type == _JSON:
            headers = _SEND_JSON
        else:
            headers = {"Accept": _JSON, "Content-Type": content_type}
        request = HTTPRequest(method, path, tuple(params) if params else (), headers, data, timeout)
        backoff: Backoff | None = None  # made on the first retry: most requests never need one
        attempt = 0
        while True:
            attempt += 1
            last_try = attempt >= self.retry.max_attempts
            try:
                response = await self.transport.send(request, stream=stream)
            except TransportError as err:
                if last_try or (err.request_sent and method != "GET"):
                    raise
                logger.debug("retrying after transport error", extra={"method": method, "path": path, "error": str(err)})
                backoff = backoff or self._new_backoff()
                await backoff.wait()
                continue
            if 200 <= response.status < 300:
                return response
            body_bytes = await response.read()
            error = error_from_response(response.status, body_bytes)
            wait = retry_after(response.headers)
            retryable = response.status == 429 or (response.status >= 500 and (wait is not None or method == "GET"))
            if last_try or not retryable:
                raise error
            backoff = backoff or self._new_backoff()
            delay = max(backoff.next_delay(), wait or 0.0)
            logger.debug("retrying after HTTP error", extra={"method": method, "path": path, "code": response.status})
            await self._clock.sleep(delay)

    def _new_backoff(self) -> Backoff:
        return Backoff(initial=self.retry.initial, cap=self.retry.cap, jitter=0.5, clock=self._clock, rng=self._rng)

    async def request_json(self, method: str, path: str, **kw: Any) -> Any:
        response = await self.send(method, path, **kw)
        raw = await response.read()
        return orjson.loads(raw) if raw else None

    def _namespace(self, resource: Resource, namespace: str | None, obj: Mapping[str, Any] | None = None) -> str | None:
        if not resource.namespaced:
            return None
        return namespace or (obj is not None and _meta(obj).get("namespace")) or self.config.namespace

    # -- reads -------------------------------------------------------------------------

    async def get(self, resource: Resource, namespace: str | None, name: str, *, subresource: str | None = None) -> dict[str, Any]:
        path = resource.path(self._namespace(resource, namespace), name, subresource)
        result: dict[str, Any] = await self.request_json("GET", path)
        return result

    async def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
        timeout: float | None = 60.0,
    ) -> dict[str, Any]:
        """One page of a list (``namespace=None``: all namespaces)."""
        params = _selector_params(label_selector, field_selector)
        if limit:
            params.append(("limit", str(limit)))
        if continue_token:
            params.append(("continue", continue_token))
        if resource_version is not None:
            params.append(("resourceVersion", resource_version))
        if resource_version_match:
            params.append(("resourceVersionMatch", resource_version_match))
        result: dict[str, Any] = await self.request_json("GET", resource.path(namespace or None), params=params, timeout=timeout)
        return result

    async def list_pages(self, resource: Resource, namespace: str | None = None, *, limit: int = 500, **kw: Any) -> AsyncIterator[dict[str, Any]]:
        """Every page of a list, following ``continue`` tokens."""
        page = await self.list(resource, namespace, limit=limit, **kw)
        yield page
        kw.pop("resource_version", None)
        kw.pop("resource_version_match", None)
        while token := (page.get("metadata") or {}).get("continue"):
            page = await self.list(resource, namespace, limit=limit, continue_token=token, **kw)
            yield page

    async def list_all(self, resource: Resource, namespace: str | None = None, *, limit: int = 500, **kw: Any) -> dict[str, Any]:
        """A whole list, fetched in pages of ``limit`` and joined into one list object.

        If a continue token expires mid-way (410), the list is fetched again in
        one unpaginated request, as client-go's pager does.
        """
        items: builtins.list[Any] = []
        first: dict[str, Any] | None = None
        try:
            async for page in self.list_pages(resource, namespace, limit=limit, **kw):
                first = first or page
                items.extend(page.get("items") or ())
        except Expired:
            if first is None:
                raise
            logger.info("continue token expired; listing without paging", extra={"resource": str(resource)})
            return await self.list(resource, namespace, **kw)
        assert first is not None
        meta = dict(first.get("metadata") or {})
        meta.pop("continue", None)
        meta.pop("remainingItemCount", None)
        return {**first, "metadata": meta, "items": items}

    # -- writes ------------------------------------------------------------------------

    @staticmethod
    def _write_params(dry_run: bool, field_manager: str | None, field_validation: str | None = None) -> builtins.list[tuple[str, str]]:
        params = []
        if dry_run:
            params.append(("dryRun", "All"))
        if field_manager:
            params.append(("fieldManager", field_manager))
        if field_validation:
            params.append(("fieldValidation", field_validation))
        return params

    async def create(
        self,
        resource: Resource,
        obj: Mapping[str, Any],
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        name: str | None = None,
        dry_run: bool = False,
        field_manager: str | None = None,
        field_validation: str | None = None,
    ) -> dict[str, Any]:
        """POST ``obj`` (to the collection, or to ``name``'s ``subresource`` such as ``eviction``)."""
        path = resource.path(self._namespace(resource, namespace, obj), name, subresource)
        params = self._write_params(dry_run, field_manager, field_validation)
        result: dict[str, Any] = await self.request_json("POST", path, params=params, body=obj)
        return result

    async def update(
        self,
        resource: Resource,
        obj: Mapping[str, Any],
        *,
        subresource: str | None = None,
        dry_run: bool = False,
        field_manager: str | None = None,
        field_validation: str | None = None,
    ) -> dict[str, Any]:
        """PUT ``obj`` at its own name (its ``resourceVersion`` guards against lost updates)."""
        path = resource.path(self._namespace(resource, None, obj), _meta(obj).get("name"), subresource)
        params = self._write_params(dry_run, field_manager, field_validation)
        result: dict[str, Any] = await self.request_json("PUT", path, params=params, body=obj)
        return result

    async def update_status(self, resource: Resource, obj: Mapping[str, Any], **kw: Any) -> dict[str, Any]:
        return await self.update(resource, obj, subresource="status", **kw)

    async def patch(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        patch: Any,
        *,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """PATCH with any of the four types. The default, JSON merge patch,
        works for every resource (strategic merge does not for custom ones)."""
        if patch_type is PatchType.APPLY and not field_manager:
            raise ValueError("an apply patch needs a field_manager")
        params = self._write_params(dry_run, field_manager)
        if force is not None and patch_type is PatchType.APPLY:
            params.append(("force", "true" if force else "false"))
        path = resource.path(self._namespace(resource, namespace), name, subresource)
        body = patch if isinstance(patch, bytes) else orjson.dumps(patch)
        result: dict[str, Any] = await self.request_json("PATCH", path, params=params, body=body, content_type=patch_type.value)
        return result

    async def apply(
        self, resource: Resource, obj: Mapping[str, Any], *, field_manager: str, force: bool = False,
        subresource: str | None = None, dry_run: bool = False,
    ) -> dict[str, Any]:
        """Server-side apply ``obj`` (a JSON body is valid YAML) as ``field_manager``."""
        meta = _meta(obj)
        return await self.patch(resource, meta.get("namespace"), meta["name"], obj, patch_type=PatchType.APPLY,
                                subresource=subresource, field_manager=field_manager, force=force, dry_run=dry_run)

    @staticmethod
    def _delete_options(
        propagation_policy: str | None, grace_period_seconds: int | None, preconditions: Mapping[str, str] | None, dry_run: bool,
    ) -> dict[str, Any] | None:
        options: dict[str, Any] = {}
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if preconditions:
            options["preconditions"] = dict(preconditions)
        if dry_run:
            options["dryRun"] = ["All"]
        return {"kind": "DeleteOptions", "apiVersion": "v1", **options} if options else None

    async def delete(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        *,
        propagation_policy: str | None = None,
        grace_period_seconds: int | None = None,
        preconditions: Mapping[str, str] | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """DELETE; returns the object (still terminating, or as deleted) or a success Status."""
        body = self._delete_options(propagation_policy, grace_period_seconds, preconditions, dry_run)
        path = resource.path(self._namespace(resource, namespace), name)
        result: dict[str, Any] = await self.request_json("DELETE", path, body=body)
        return result

    async def delete_collection(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        propagation_policy: str | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        body = self._delete_options(propagation_policy, grace_period_seconds, None, dry_run)
        path = resource.path(self._namespace(resource, namespace))
        params = _selector_params(label_selector, field_selector)
        result: dict[str, Any] = await self.request_json("DELETE", path, params=params, body=body)
        return result

    # -- watch ---------------------------------------------------------------------------

    def watch(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        allow_bookmarks: bool = True,
        timeout_seconds: int | None = None,
        send_initial_events: bool = False,
        read_timeout: float | None = None,
    ) -> WatchStream:
        """An async iterator of :class:`WatchEvent` (see :class:`WatchStream`).

        ``send_initial_events`` asks for a streaming list: the current objects
        as ADDED, then a BOOKMARK with ``k8s.io/initial-events-end``.
        """
        params = [("watch", "true"), *_selector_params(label_selector, field_selector)]
        if resource_version is not None:
            params.append(("resourceVersion", resource_version))
        if allow_bookmarks or send_initial_events:
            params.append(("allowWatchBookmarks", "true"))
        if send_initial_events:
            params += [("sendInitialEvents", "true"), ("resourceVersionMatch", "NotOlderThan")]
        if timeout_seconds is not None:
            params.append(("timeoutSeconds", str(timeout_seconds)))
        path = resource.path(namespace or None)
        return WatchStream(lambda: self.send("GET", path, params=params, stream=True, timeout=read_timeout))

