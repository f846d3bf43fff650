"""Admission: what a request must pass, or how it is changed, before it is stored.

``namespace_lifecycle``  objects only in live namespaces; a deleted namespace's
                         contents removed, then the namespace itself
``service_ips``          a Service's ClusterIP allocated from the service CIDR
``field_validation``     ``fieldValidation=Strict|Warn|Ignore`` on unknown or
                         duplicate fields
``time_fields``          timestamps rewritten as Go's encoder writes them

Wired in by ``server`` (as hooks on the object store) and called by handlers;
sits above the watch cache and the object store.
"""
