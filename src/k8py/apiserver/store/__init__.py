"""The write side: the generic object store over :class:`k8py.storage.Storage`.

``object_store``     create, get, update for any registered resource
                     (upstream's ``registry/generic/registry.Store``): guarded
                     writes, retries on conflict, admission hooks
``update_attempt``   one read-mutate-write of an update (from the store, or
                     from the watch cache's copy as a first guess)
``stored_form``      the bytes a stored value holds; the kind/apiVersion header
``object_meta``      the metadata the server owns (uid, timestamps,
                     generation, generated names)
``field_managers``   who is writing, and managedFields bookkeeping

Depends only on the registry and :mod:`k8py.storage`.
"""
