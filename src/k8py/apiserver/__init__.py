"""The API server: every read and write of the cluster goes through here.

The request path, top to bottom (each layer imports only the layers below it;
the ``layers`` contract in ``pyproject.toml`` makes a cycle fail the build)::

    server.py       APIServer: wires storage, registry, watch cache, admission
                    and HTTP together, bootstraps the system objects, owns the
                    lifecycle of all of them; ``server_config.py`` its
                    settings, ``access_control.py`` the guards it wires
                    (authentication, authorization, admission, audit, overload)
    app.py          the aiohttp Application: routes by path shape, turns
                    exceptions into Status bodies; ``metrics.py`` counts
    openapi/        /api, /apis (discovery) and /openapi/v3, from the registry
    handlers/       one request to one response: path -> verb -> decode ->
                    admit -> store or cache -> encode (verbs, subresources,
                    list, watch stream, patch, delete, codec, responses)
    admission/      what a write must pass before it is stored: namespace
                    lifecycle, ClusterIP allocation, fieldValidation,
                    canonical timestamps
    streaming/      (beside admission) the subresources the kubelet answers:
                    pods/log, exec, attach, portforward, nodes/proxy, relayed
    authz/          (below admission) who may do what: the authorizers (RBAC,
                    Node) behind one Authorizer protocol
    authn/          (below authz) who a request is: the authenticator chain
                    filling request[USER_KEY] with a UserInfo
    watch/          the read side: one store watch (cacher) feeding a watch
                    cache per resource, fanned out to one Watcher per watch
    store/          the write side: create/read/update over
                    :class:`k8py.storage.Storage` with server-owned metadata
                    and managedFields
    registry.py     what the server knows about each kind
                    (:class:`~k8py.apiserver.registry.ResourceDefinition`);
                    ``resources/`` fills it with the built-in kinds, whose
                    ``defaults/``, ``validation/`` and ``printers/`` (Table
                    columns) sit beside it

The ``layers`` contract names these layers exactly (and is exhaustive: a new
package here must be placed in it); an ``acyclic_siblings`` contract forbids
import cycles among the modules of any package.

A GET of a list, for example: ``app`` routes it to
``handlers.verbs.ResourceHandlers``; ``handlers.query`` parses the selectors;
``handlers.listing`` reads the resource's ``watch.watch_cache.WatchCache``
(waiting on ``watch.cacher.Cacher`` for a consistent read); and
``handlers.responses`` splices the cached JSON into the reply. A create goes
``handlers.verbs`` -> ``admission.field_validation`` -> the kind's strategy
(defaults, validation) -> ``store.object_store`` -> storage; the store's
watch then brings the object back into the watch cache through the cacher.
"""
