"""Admission: what a request must pass, or how it is changed, before it is stored.

The admission chain (upstream's ``k8s.io/apiserver/pkg/admission``)
----------------------------------------------------------------------
``attributes``  :class:`AdmissionAttributes`: operation (CREATE, UPDATE,
                DELETE, CONNECT), kind, resource, subresource, namespace,
                name, object, old object, user, dry run, options, and the
                sinks for warnings and audit annotations
``chain``       :class:`AdmissionChain`: the enabled plugins; all mutating
                ``admit`` calls first, then all validating ``validate`` calls,
                both in upstream's order; the first error ends the request
``plugins``     the names in upstream's order (``ORDER``), the default-on set,
                :func:`register` (name -> factory), ``build_chain`` from
                ``--enable-admission-plugins`` / ``--disable-admission-plugins``
``config``      ``--admission-control-config-file`` (AdmissionConfiguration)
``request``     one request's admission, as the object store calls it
``builtin``     registers the plugins below

Writing a plugin. A plugin is any object with::

    name: str                                        # one of plugins.ORDER
    def handles(self, operation: Operation) -> bool  # asked once, when the chain is built
    async def admit(self, attributes) -> None        # optional: mutating phase
    async def validate(self, attributes) -> None     # optional: validating phase

``admit`` may change ``attributes.object`` (or assign a new dict); ``validate``
must not. Refuse with a StatusError, usually ``attributes.forbidden(reason)``
(``<resource> "<name>" is forbidden: <reason>``, as upstream's NewForbidden).
``attributes.add_warning``, ``add_audit_annotation`` and ``on_abort`` (undo a
charge if the write then fails) are the sinks. A plugin checks the resource
itself (``attributes.is_core("pods")``) and usually skips subresources.
Register it with ``plugins.register("NodeRestriction", lambda ctx: Plugin(...))``
where ``ctx`` is a :class:`~k8py.apiserver.admission.plugins.PluginContext`
(registry, watch cache, store, per-plugin config, ``extra`` for what the
server hands over: authorizer, service resolver); the server builds the
chain after ``builtin.register_builtin_plugins()``. NodeRestriction (rbac),
the webhook and policy plugins (webhooks) register the same way.

Where the chain is called (``handlers`` build the attributes, the store runs
them at upstream's points, see ``store.admission_hook``): create, update,
patch (inside the guaranteed update, with the stored object as old), delete
and deletecollection (per object), ``/status``, ``/scale`` (as a Scale),
``/binding`` and ``/eviction`` (CREATE of the posted object), ``namespaces/
finalize``, and CONNECT for exec, attach, portforward and proxy. Internal
writes (bootstrap, quota charges) are not admitted.

Plugins here
------------
``namespace_lifecycle``  NamespaceLifecycle: objects only in live namespaces;
                         default, kube-system and kube-public never deleted
``limit_ranger``         LimitRanger: LimitRange defaults and bounds for pods
``priority``             Priority: spec.priority from the PriorityClass
``default_toleration_seconds``  DefaultTolerationSeconds
``resource_quota``       ResourceQuota: charged on create and update

Other request-time checks (not plugins): ``service_ips`` (ClusterIP and node
port allocation, the Service REST's job upstream), ``field_validation``
(``fieldValidation=Strict|Warn|Ignore``), ``time_fields`` (timestamps as Go
writes them).

Sits above the watch cache and the object store, below the handlers.
"""

from k8py.apiserver.admission.attributes import AdmissionAttributes, Operation

__all__ = ["AdmissionAttributes", "Operation"]
