"""HTTP handlers: one resource request in, one response out.

``verbs``          ResourceHandlers: (method, path) -> get, list, watch, create,
                   update, patch, delete, deletecollection; the generic path
                   every kind takes
``context``        RequestContext (one request, resolved once) and the seams:
                   SubresourceHost (what a subresource handler may use of the
                   generic handlers), DeleteHooks (a kind's say in a DELETE)
``request_info``   the path parsed into group/version/resource/namespace/name
``query``          selectors and list options of a list or watch
``codec``          request bodies (JSON, YAML, protobuf) and response formats
``responses``      objects, lists and Tables encoded for the wire
``listing``        list semantics (resourceVersion, limit/continue) on the cache
``watch_stream``   a watch served as a chunked stream of events
``patching``       the four patch types through the update path
``deletion``       DeleteOptions, graceful deletion, finalizers
``subresources``   status, scale, binding, finalize (and the kubelet's, relayed
                   by ``streaming``): a registry keyed by name

Handlers sit above admission, the watch cache and the object store, and
import nothing from ``app`` or ``server``.
"""
