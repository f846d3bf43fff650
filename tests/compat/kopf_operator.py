"""A small kopf operator, run unchanged against a k8py API server by the test beside it."""

import kopf


@kopf.on.create("configmaps", labels={"kopf-demo": "yes"})
def created(body, name, patch, **_):  # type: ignore[no-untyped-def]
    patch.setdefault("data", {})["handled"] = "by-kopf"
    kopf.info(body, reason="Handled", message=f"kopf handled {name}")


@kopf.on.update("configmaps", labels={"kopf-demo": "yes"})
def updated(patch, **_):  # type: ignore[no-untyped-def]
    patch.setdefault("metadata", {}).setdefault("annotations", {})["kopf-demo/updated"] = "true"


@kopf.on.delete("configmaps", labels={"kopf-demo": "yes"}, optional=True)
def deleted(name, logger, **_):  # type: ignore[no-untyped-def]
    logger.info(f"deleted {name}")
