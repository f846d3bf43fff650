"""The read side: the watch cache every list and watch is served from.

``cacher``        one store watch over ``/registry/`` feeding every resource's
                  cache; waits for a revision (consistent reads); reloads
                  after a compaction
``watch_cache``   one resource's current objects (pre-encoded) plus a ring of
                  recent events; fans each event out to the watchers it may
                  concern
``cached_object`` what the cache keeps of an object and of an event
``watcher``       one watch connection's filtered, bounded view of the events
``watcher_group`` watchers with one selection, decided and flushed as one

Depends only on the registry and :mod:`k8py.storage`; the HTTP side
(``handlers.watch_stream``, ``handlers.listing``) sits above it.
"""
