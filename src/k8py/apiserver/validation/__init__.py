"""Semantic validation of built-in kinds, with upstream's field paths and messages.

``validate(group, kind, obj, old=None)`` returns the causes of an ``Invalid``
(422) error — empty when the object is valid. ``old`` is the stored object on
update, which turns on the immutability rules (a pod's spec, a Deployment's
selector, a Job's template, a Service's cluster IP). It runs after defaulting,
as upstream's strategies do, and never raises on malformed input.

One module per API group (``core``, ``apps``, ``batch``), each exporting a
``VALIDATORS`` table of kind → ``(obj, old) -> list[Cause]``; ``podspec``
holds the pod rules they share and ``field`` the error wording. Object
metadata is not checked here (``k8py.api.names.validate_object_meta``).
Kinds without rules (and custom resources) validate as empty.
"""

from __future__ import annotations

from typing import Any, Callable

from k8py.api.errors import Cause

from k8py.apiserver.validation import apps, autoscaling, batch, certificates, core

__all__ = ["validate"]

Validator = Callable[[dict[str, Any], dict[str, Any] | None], list[Cause]]

_BY_GROUP: dict[str, dict[str, Validator]] = {
    "": core.VALIDATORS,
    "apps": apps.VALIDATORS,
    "autoscaling": autoscaling.VALIDATORS,
    "batch": batch.VALIDATORS,
    "certificates.k8s.io": certificates.VALIDATORS,
}


def validate(
    group: str, kind: str, obj: dict[str, Any], old: dict[str, Any] | None = None
) -> list[Cause]:
    """Causes for ``obj`` (of ``group``/``kind``) being invalid; [] when valid."""
    validator = _BY_GROUP.get(group, {}).get(kind)
    if validator is None or not isinstance(obj, dict):
        return []
    return validator(obj, old if isinstance(old, dict) else None)
