"""``GET pods/NAME/log``: validate ``PodLogOptions``, stream the kubelet's answer.

Upstream ``pkg/registry/core/pod/rest/log.go``: the options are validated
here (422 ``PodLogOptions "x" is invalid`` as upstream), the container is
resolved (the only one, or a 400 naming the choices), and the request is
proxied to the kubelet's ``/containerLogs/NS/POD/CONTAINER`` with the same
options. The body is streamed through as it arrives (``follow=true`` keeps the
response open until the kubelet or the client ends it); a kubelet error
becomes the same Status for the client.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Mapping
from urllib.parse import quote

import aiohttp
from aiohttp import web

from k8py.api.errors import Cause, Invalid, ServiceUnavailable
from k8py.api.stream_channels import query_flag
from k8py.apiserver.streaming.http_relay import copy_body
from k8py.apiserver.streaming.kubelet_client import KubeletClient, pod_container, status_error_from_response

__all__ = ["serve_pod_log", "log_options"]

log = logging.getLogger(__name__)

_INT_OPTIONS = ("sinceSeconds", "tailLines", "limitBytes")
_BOOL_OPTIONS = ("follow", "previous", "timestamps")


def log_options(name: str, params: Mapping[str, str]) -> dict[str, str]:
    """The options to pass to the kubelet, validated as upstream's
    ``ValidatePodLogOptions``."""
    causes: list[Cause] = []
    out: dict[str, str] = {}
    for key in _BOOL_OPTIONS:
        if key in params and query_flag(params[key]):
            out[key] = "true"
    for key in _INT_OPTIONS:
        if key not in params:
            continue
        try:
            value = int(params[key])
        except ValueError:
            causes.append(Cause("FieldValueInvalid", f"Invalid value: \"{params[key]}\": must be an integer", key))
            continue
        if key == "sinceSeconds" and value < 1:
            causes.append(Cause("FieldValueInvalid", f"Invalid value: {value}: must be greater than 0", key))
        elif key == "tailLines" and value < 0:
            causes.append(Cause("FieldValueInvalid", f"Invalid value: {value}: must be greater than or equal to 0", key))
        elif key == "limitBytes" and value < 1:
            causes.append(Cause("FieldValueInvalid", f"Invalid value: {value}: must be greater than 0", key))
        else:
            out[key] = str(value)
    if "sinceTime" in params:
        try:
            datetime.fromisoformat(params["sinceTime"])
            out["sinceTime"] = params["sinceTime"]
        except ValueError:
            causes.append(Cause("FieldValueInvalid", f"Invalid value: \"{params['sinceTime']}\": must be an RFC 3339 time", "sinceTime"))
    if "sinceTime" in out and "sinceSeconds" in out:
        causes.append(Cause("FieldValueForbidden", "Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified", ""))
    if causes:
        raise Invalid.for_object("PodLogOptions", name, causes)
    return out


async def serve_pod_log(
    request: web.Request, kubelets: KubeletClient, namespace: str, name: str, params: Mapping[str, str]
) -> web.StreamResponse:
    options = log_options(name, params)
    pod, where = await kubelets.for_pod(namespace, name)
    container = pod_container(pod, params.get("container", ""))
    url = f"{where.base_url}/containerLogs/{quote(namespace)}/{quote(name)}/{quote(container)}"
    try:
        upstream = await kubelets.session.get(url, params=options)
    except (aiohttp.ClientError, OSError) as err:
        raise ServiceUnavailable(
            f"cannot reach the kubelet of node {where.node!r} at {where.base_url} ({err}): is it running?"
        ) from None
    try:
        if upstream.status != 200:
            raise await status_error_from_response(upstream)
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        # the client going away, or the kubelet, just ends the response
        await copy_body(upstream, response, logger=log, ended_early="log stream ended early",
                        extra={"pod": f"{namespace}/{name}"})
        return response
    finally:
        upstream.release()
