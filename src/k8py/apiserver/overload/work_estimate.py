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
"""

from __future__ import annotations

import math
from typing import Callable, Mapping

from k8py.apiserver.authz.attributes import Attributes

__all__ = ["list_seats", "OBJECTS_PER_SEAT", "MAX_LIST_SEATS"]

OBJECTS_PER_SEAT = 100
MAX_LIST_SEATS = 10


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
