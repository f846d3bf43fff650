"""A kopf operator of a custom resource (status subresource, a finalizer from
its delete handler), run unchanged against k8py by test_kopf_crd.py."""

import kopf


@kopf.on.create("stable.example.com", "v1", "crontabs")
def create_fn(spec, name, **_):  # type: ignore[no-untyped-def]
    # a handler's result lands in status.create_fn (through /status)
    return {"schedule-seen": spec.get("cronSpec", ""), "for": name}


@kopf.on.field("stable.example.com", "v1", "crontabs", field="spec.replicas")
def replicas_fn(old, new, patch, **_):  # type: ignore[no-untyped-def]
    patch.setdefault("status", {})["replicas"] = new


@kopf.on.delete("stable.example.com", "v1", "crontabs")
def delete_fn(name, logger, **_):  # type: ignore[no-untyped-def]
    logger.info(f"cleaned up after {name}")
