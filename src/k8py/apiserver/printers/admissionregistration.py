"""Printers for ``admissionregistration.k8s.io`` and ``apiregistration.k8s.io``,
as upstream's: webhook configurations ``NAME  WEBHOOKS  AGE``; policies
``NAME  VALIDATIONS  PARAMKIND  AGE``; bindings ``NAME  POLICYNAME  PARAMREF
AGE``; APIServices ``NAME  SERVICE  AVAILABLE  AGE`` (``Local`` for this
server's own group/versions, ``False (Reason)`` when unavailable)."""

from __future__ import annotations

from datetime import datetime

from .cells import dig, format_label_selector, object_age
from .columns import Column, Object, Printer, age_column, name_column

__all__ = ["PRINTERS", "APISERVICE_PRINTERS"]


def _name(obj: Object) -> str:
    return str(dig(obj, "metadata", "name", default=""))


WEBHOOKS = Printer(
    (name_column(), Column("Webhooks", type="integer", doc="Webhooks indicates the number of webhooks in the configuration"),
     age_column()),
    lambda obj, now: [_name(obj), len(obj.get("webhooks") or []), object_age(obj, now)],
)


def _param_kind(obj: Object) -> str:
    kind = dig(obj, "spec", "paramKind")
    if not kind:
        return "<unset>"
    return f"{kind.get('apiVersion', '')}/{kind.get('kind', '')}"


POLICY = Printer(
    (name_column(), Column("Validations", type="integer", doc="Validations indicates the number of validation rules"),
     Column("ParamKind", doc="ParamKind specifies the kind of resources used to parameterize this policy"), age_column()),
    lambda obj, now: [_name(obj), len(dig(obj, "spec", "validations", default=None) or []), _param_kind(obj), object_age(obj, now)],
)


def _param_ref(obj: Object) -> str:
    ref = dig(obj, "spec", "paramRef")
    if not ref:
        return "<unset>"
    if ref.get("name"):
        return f"{ref['namespace']}/{ref['name']}" if ref.get("namespace") else f"*/{ref['name']}"
    if ref.get("selector") is not None:
        return format_label_selector(ref["selector"])
    return "<unset>"


BINDING = Printer(
    (name_column(), Column("PolicyName", doc="PolicyName references a ValidatingAdmissionPolicy name"),
     Column("ParamRef", doc="ParamRef specifies the parameter resource used to configure the admission control policy"),
     age_column()),
    lambda obj, now: [_name(obj), str(dig(obj, "spec", "policyName", default="")), _param_ref(obj), object_age(obj, now)],
)


def _available(obj: Object) -> str:
    for condition in dig(obj, "status", "conditions", default=None) or []:
        if condition.get("type") != "Available":
            continue
        status = str(condition.get("status", ""))
        if status == "True" or not condition.get("reason"):
            return status
        return f"{status} ({condition['reason']})"
    return "Unknown"


def _service(obj: Object) -> str:
    service = dig(obj, "spec", "service")
    return f"{service.get('namespace', '')}/{service.get('name', '')}" if service else "Local"


def _apiservice_cells(obj: Object, now: datetime) -> list[object]:
    return [_name(obj), _service(obj), _available(obj), object_age(obj, now)]


APISERVICE = Printer(
    (name_column(), Column("Service", doc="The reference to the service that hosts this API endpoint."),
     Column("Available", doc="Whether this service is available."), age_column()),
    _apiservice_cells,
)

PRINTERS = {
    "MutatingWebhookConfiguration": WEBHOOKS,
    "ValidatingWebhookConfiguration": WEBHOOKS,
    "ValidatingAdmissionPolicy": POLICY,
    "ValidatingAdmissionPolicyBinding": BINDING,
}
APISERVICE_PRINTERS = {"APIService": APISERVICE}
