"""The Endpoints, EndpointSlice and EndpointSlice mirroring controllers
against a real API server; pod statuses are written by the test, as a
kubelet would write them (no runtime is needed to decide readiness)."""

from __future__ import annotations

from typing import Any

from k8py.api.errors import NotFound
from k8py.client.resources import ENDPOINT_SLICES, ENDPOINTS, PODS, SERVICES
from k8py.controllers.context import ControllerOptions
from tests.controllers.conftest import eventually

NS = "default"


def _pod(name: str, labels: dict[str, str], *, port_name: str = "http", port: int = 8080, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels},
            "spec": {"containers": [{"name": "c", "image": "nginx", "ports": [{"name": port_name, "containerPort": port}]}],
                     **spec}}


async def _run_pod(client, name: str, ip: str, *, ready: bool = True, labels: dict[str, str] | None = None, **kw: Any) -> None:
    await client.create(PODS, _pod(name, labels or {"app": "web"}, **kw), namespace=NS)
    await _set_ready(client, name, ip, ready)


async def _set_ready(client, name: str, ip: str, ready: bool) -> None:
    pod = await client.get(PODS, NS, name)
    pod["status"] = {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                     "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    await client.update_status(PODS, pod)


def _service(name: str, *, selector: dict[str, str] | None = None, target: Any = "http", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"metadata": {"name": name, "labels": {"tier": "front"}},
                            "spec": {"ports": [{"name": "web", "port": 80, "targetPort": target}], **spec}}
    if selector is not None:
        body["spec"]["selector"] = selector
    return body


async def _endpoints(client, name: str) -> dict[str, Any] | None:
    try:
        return await client.get(ENDPOINTS, NS, name)
    except NotFound:
        return None


async def _slices(client, service: str) -> list[dict[str, Any]]:
    found = await client.list(ENDPOINT_SLICES, NS, label_selector=f"kubernetes.io/service-name={service}")
    return found["items"]


def _by_ip(slices: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {ep["addresses"][0]: ep for s in slices for ep in s.get("endpoints") or []}


async def test_ready_and_unready_pods_are_split_and_named_ports_resolved_per_pod(client, start_manager):
    await start_manager("endpoint", "endpointslice")
    await _run_pod(client, "a", "127.65.0.2")
    await _run_pod(client, "b", "127.65.0.3", ready=False)
    await _run_pod(client, "c", "127.65.0.4", port=9090)  # same port name, another number
    await _run_pod(client, "other", "127.65.0.5", labels={"app": "db"})
    await client.create(SERVICES, _service("web", selector={"app": "web"}), namespace=NS)

    async def subsets_settled():
        ep = await _endpoints(client, "web")
        return ep if ep and len(ep.get("subsets") or []) == 2 else None

    ep = await eventually(subsets_settled)
    by_port = {s["ports"][0]["port"]: s for s in ep["subsets"]}
    assert [a["ip"] for a in by_port[8080]["addresses"]] == ["127.65.0.2"]
    assert [a["ip"] for a in by_port[8080]["notReadyAddresses"]] == ["127.65.0.3"]
    assert [a["ip"] for a in by_port[9090]["addresses"]] == ["127.65.0.4"]
    assert by_port[8080]["ports"] == [{"name": "web", "port": 8080, "protocol": "TCP"}]
    assert by_port[8080]["addresses"][0]["targetRef"]["name"] == "a"
    assert ep["metadata"]["labels"]["tier"] == "front"

    async def slices_settled():
        slices = await _slices(client, "web")
        return slices if len(_by_ip(slices)) == 3 else None

    slices = await eventually(slices_settled)
    assert {tuple(p["port"] for p in s["ports"]) for s in slices} == {(8080,), (9090,)}
    eps = _by_ip(slices)
    assert eps["127.65.0.2"]["conditions"] == {"ready": True, "serving": True, "terminating": False}
    assert eps["127.65.0.3"]["conditions"] == {"ready": False, "serving": False, "terminating": False}
    for s in slices:
        labels = s["metadata"]["labels"]
        assert labels["endpointslice.kubernetes.io/managed-by"] == "endpointslice-controller.k8s.io"
        assert labels["tier"] == "front"
        assert s["metadata"]["ownerReferences"][0]["kind"] == "Service"
        assert s["metadata"]["name"].startswith("web-")

    # readiness flips are followed in both objects
    await _set_ready(client, "b", "127.65.0.3", True)
    await _set_ready(client, "a", "127.65.0.2", False)

    async def flipped():
        eps = _by_ip(await _slices(client, "web"))
        ep = await _endpoints(client, "web")
        ready_ips = {a["ip"] for s in ep.get("subsets") or [] for a in s.get("addresses") or []}
        return eps["127.65.0.3"]["conditions"]["ready"] and not eps["127.65.0.2"]["conditions"]["ready"] \
            and ready_ips == {"127.65.0.3", "127.65.0.4"}

    await eventually(flipped)


async def test_terminating_pods_stay_in_slices_marked_terminating_but_leave_endpoints(client, start_manager):
    await start_manager("endpoint", "endpointslice")
    await client.create(SERVICES, _service("web", selector={"app": "web"}, target=8080), namespace=NS)
    pod = _pod("a", {"app": "web"})
    pod["metadata"]["finalizers"] = ["test/hold"]
    await client.create(PODS, pod, namespace=NS)
    await _set_ready(client, "a", "127.65.1.2", True)
    await eventually(lambda: _slices_with(client, "127.65.1.2"))
    await client.delete(PODS, NS, "a", grace_period_seconds=0)

    async def terminating():
        eps = _by_ip(await _slices(client, "web"))
        ep = eps.get("127.65.1.2")
        return ep and ep["conditions"] == {"ready": False, "serving": True, "terminating": True}

    await eventually(terminating)
    await eventually(lambda: _no_endpoint_addresses(client, "web"))
    pod = await client.get(PODS, NS, "a")
    pod["metadata"]["finalizers"] = []
    await client.update(PODS, pod)

    async def placeholder():
        slices = await _slices(client, "web")
        return len(slices) == 1 and not slices[0].get("endpoints") and not slices[0].get("ports")

    await eventually(placeholder)


async def _slices_with(client, ip: str) -> bool:
    return ip in _by_ip(await _slices(client, "web"))


async def _no_endpoint_addresses(client, name: str) -> bool:
    ep = await _endpoints(client, name)
    return ep is not None and not ep.get("subsets")


async def test_publish_not_ready_addresses_lists_every_pod_as_ready(client, start_manager):
    await start_manager("endpoint", "endpointslice")
    await _run_pod(client, "a", "127.65.2.2", ready=False)
    await client.create(SERVICES, _service("db", selector={"app": "web"}, clusterIP="None",
                                           publishNotReadyAddresses=True), namespace=NS)

    async def published():
        ep = await _endpoints(client, "db")
        eps = _by_ip(await _slices(client, "db"))
        return ep and ep.get("subsets") and ep["subsets"][0].get("addresses") and \
            eps.get("127.65.2.2", {}).get("conditions", {}).get("ready") is True and ep

    ep = await eventually(published)
    assert ep["metadata"]["labels"]["service.kubernetes.io/headless"] == ""


async def test_slices_hold_at_most_max_endpoints_and_go_with_the_service(client, start_manager):
    await start_manager("endpoint", "endpointslice", options=ControllerOptions(extra={"max_endpoints_per_slice": 2}))
    await client.create(SERVICES, _service("web", selector={"app": "web"}, target=8080), namespace=NS)
    for i in range(5):
        await _run_pod(client, f"p{i}", f"127.65.3.{i + 2}")

    async def five():
        slices = await _slices(client, "web")
        return slices if len(_by_ip(slices)) == 5 else None

    slices = await eventually(five)
    assert len(slices) == 3 and all(len(s["endpoints"]) <= 2 for s in slices)
    await client.delete(PODS, NS, "p0", grace_period_seconds=0)
    await eventually(lambda: _count(client, 4))
    await client.delete(SERVICES, NS, "web")
    await eventually(lambda: _count_slices(client, 0))
    await eventually(lambda: _gone(client, "web"))


async def _count(client, n: int) -> bool:
    return len(_by_ip(await _slices(client, "web"))) == n


async def _count_slices(client, n: int) -> bool:
    return len(await _slices(client, "web")) == n


async def _gone(client, name: str) -> bool:
    return await _endpoints(client, name) is None


async def test_a_service_without_selector_keeps_manual_endpoints_mirrored_into_slices(client, start_manager):
    await start_manager("endpoint", "endpointslice", "endpointslicemirroring")
    await client.create(SERVICES, _service("ext", target=5432), namespace=NS)
    manual = {"metadata": {"name": "ext", "labels": {"team": "x"}},
              "subsets": [{"addresses": [{"ip": "127.66.0.9"}], "notReadyAddresses": [{"ip": "127.66.0.10"}],
                           "ports": [{"name": "web", "port": 5432, "protocol": "TCP"}]}]}
    await client.create(ENDPOINTS, manual, namespace=NS)

    async def mirrored():
        slices = await _slices(client, "ext")
        return slices if len(_by_ip(slices)) == 2 else None

    slices = await eventually(mirrored)
    assert len(slices) == 1
    assert slices[0]["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"] == "endpointslicemirroring-controller.k8s.io"
    assert slices[0]["metadata"]["labels"]["team"] == "x"
    assert slices[0]["ports"] == [{"name": "web", "port": 5432, "protocol": "TCP"}]
    eps = _by_ip(slices)
    assert eps["127.66.0.9"]["conditions"]["ready"] and not eps["127.66.0.10"]["conditions"]["ready"]
    # the Endpoints controller leaves it alone
    ep = await _endpoints(client, "ext")
    assert ep["subsets"][0]["addresses"] == [{"ip": "127.66.0.9"}]
    # an edit is mirrored
    ep["subsets"][0]["addresses"].append({"ip": "127.66.0.11"})
    await client.update(ENDPOINTS, ep)
    await eventually(lambda: _has(client, "ext", "127.66.0.11"))
    await client.delete(ENDPOINTS, NS, "ext")
    await eventually(lambda: _none(client, "ext"))


async def _has(client, svc: str, ip: str) -> bool:
    return ip in _by_ip(await _slices(client, svc))


async def _none(client, svc: str) -> bool:
    return not await _slices(client, svc)
