"""coordination.k8s.io/v1 leases, discovery.k8s.io/v1 endpointslices,
events.k8s.io/v1 events."""

from __future__ import annotations

from k8py.apiserver.registry import ResourceDefinition
from k8py.apiserver.resources.event_conversion import EventsV1Converter
from k8py.apiserver.resources.strategies import StandardStrategy, path_getter

DEFINITIONS = [
    ResourceDefinition(
        group="coordination.k8s.io",
        version="v1",
        kind="Lease",
        plural="leases",
        singular="lease",
        namespaced=True,
        strategy=StandardStrategy("coordination.k8s.io", "v1", "Lease"),
        openapi_name="io.k8s.api.coordination.v1.Lease",
    ),
    ResourceDefinition(
        group="discovery.k8s.io",
        version="v1",
        kind="EndpointSlice",
        plural="endpointslices",
        singular="endpointslice",
        namespaced=True,
        strategy=StandardStrategy("discovery.k8s.io", "v1", "EndpointSlice", tracks_generation=True),
        openapi_name="io.k8s.api.discovery.v1.EndpointSlice",
    ),
    ResourceDefinition(
        group="events.k8s.io",
        version="v1",
        kind="Event",
        plural="events",
        singular="event",
        namespaced=True,
        short_names=("ev",),
        strategy=StandardStrategy("events.k8s.io", "v1", "Event"),
        # one stored Event, two API versions (see event_conversion)
        storage_resource="events",
        converter=EventsV1Converter(),
        field_getters={
            "regarding.kind": path_getter("regarding", "kind"),
            "regarding.name": path_getter("regarding", "name"),
            "regarding.namespace": path_getter("regarding", "namespace"),
            "regarding.uid": path_getter("regarding", "uid"),
            "reason": path_getter("reason"),
            "type": path_getter("type"),
            "reportingController": path_getter("reportingController"),
        },
        openapi_name="io.k8s.api.events.v1.Event",
    ),
]
