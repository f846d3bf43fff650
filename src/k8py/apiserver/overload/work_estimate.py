"""How many seats a request takes (upstream's APF work estimator, object-count based as in v1.32).

Most requests take one seat. A LIST takes one seat per ``OBJECTS_PER_SEAT``
(100) objects it has to go through, between 1 and the level's maximum
(``MAX_LIST_SEATS``, 10, or the level's nominal seats if fewer):

- a list pinned to one name (``fieldSelector=metadata.name=x``): 1 object;
- served from the watch cache (no ``limit``, or ``resourceVersion=0``): every
  stored object of the resource;
- paged from storage (``limit`` with another resourceVersion): twice the
  page (``min(limit, stored)``), plus all the stored ones when a label or
  field selector filters them.

The object count is the watch cache's size for the resource (all
namespaces), read when the request arrives; a resource that has no cache here
(an aggregated API's, served by another server) takes the minimum, as upstream
does for counts it does not know. Watches take one seat (they are long-running
and do not wait for one at all, see the filter).

A mutating request (create, update, patch, delete, deletecollection) also pays
for the watch events it causes (upstream's mutating work estimator): with ``N``
watchers interested in its object (watching the resource everywhere, in its
namespace, or its name), and ``N`` at least ``WATCHES_PER_SEAT`` (10), it
keeps ``ceil(N / 10)`` seats (at most the level's maximum) for
``EVENT_ADDITIONAL_DURATION`` (5 ms) times that count over the seats it keeps,
*after* it has answered: the client does not wait, the level's capacity does.
``serviceaccounts/token`` makes no event and pays nothing extra.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping

from k8py.apiserver.authz.attributes import Attributes

__all__ = ["list_seats", "mutating_estimate", "exempt_from_watch_events", "WorkEstimate", "OBJECTS_PER_SEAT", "MAX_LIST_SEATS", "WATCHES_PER_SEAT",
           "EVENT_ADDITIONAL_DURATION", "MUTATING_VERBS"]

OBJECTS_PER_SEAT = 100
MAX_LIST_SEATS = 10
WATCHES_PER_SEAT = 10
EVENT_ADDITIONAL_DURATION = 0.005
MUTATING_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


@dataclass(frozen=True)
class WorkEstimate:
    """Upstream's ``WorkEstimate``: seats while the request runs, seats kept for
    ``additional_latency`` seconds after it has answered (the watch events it caused)."""

    initial_seats: int = 1
    final_seats: int = 0
    additional_latency: float = 0.0

    @property
    def max_seats(self) -> int:
        return max(self.initial_seats, self.final_seats)


#: the estimate of most requests (one seat, nothing kept after): made once, it is immutable
_ONE_SEAT = WorkEstimate()


def exempt_from_watch_events(a: Attributes) -> bool:
    """Requests that pay nothing for watchers: reads, and ``serviceaccounts/token`` (it makes no event)."""
    if a.verb not in MUTATING_VERBS or not a.resource_request:
        return True
    return a.resource == "serviceaccounts" and a.subresource == "token"


def mutating_estimate(watch_count: int, max_seats: int = MAX_LIST_SEATS) -> WorkEstimate:
    """A mutating request's estimate from the count of watchers its change will reach."""
    if watch_count < WATCHES_PER_SEAT:
        return _ONE_SEAT
    seats = math.ceil(watch_count / WATCHES_PER_SEAT)
    work = seats * EVENT_ADDITIONAL_DURATION  # seat-seconds, reshaped into at most max_seats wide
    kept = max(1, min(seats, max_seats, MAX_LIST_SEATS))
    return WorkEstimate(1, kept, work / kept)


def list_seats(a: Attributes, query: Mapping[str, str], count: Callable[[Attributes], int | None],
               max_seats: int = MAX_LIST_SEATS) -> int:
    """The seats of a request: more than 1 only for a list over many objects."""
    if a.verb != "list" or not a.resource_request:
        return 1
    max_seats = max(1, min(max_seats, MAX_LIST_SEATS))
    if a.name:
        return 1
    stored = count(a)
    if stored is None:
        return 1
    try:
        limit = int(query.get("limit") or 0)
    except ValueError:
        return max_seats  # bound to fail validation; the same answer as upstream
    from_cache = limit <= 0 or query.get("resourceVersion") == "0"
    if from_cache:
        objects = stored
    else:
        page = min(limit, stored)
        objects = stored + page if (query.get("labelSelector") or query.get("fieldSelector")) else 2 * page
    return max(1, min(max_seats, math.ceil(objects / OBJECTS_PER_SEAT)))
