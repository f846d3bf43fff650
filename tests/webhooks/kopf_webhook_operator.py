"""A kopf operator with admission webhooks (kopf's own WebhookServer, the
configuration kopf manages itself), run unchanged against k8py by
test_kopf_webhooks.py. Its TLS files and port come from the environment."""

import os

import kopf


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_):  # type: ignore[no-untyped-def]
    settings.admission.server = kopf.WebhookServer(
        addr="127.0.0.1", host="127.0.0.1", port=int(os.environ["WEBHOOK_PORT"]),
        certfile=os.environ["WEBHOOK_CERT"], pkeyfile=os.environ["WEBHOOK_KEY"], cafile=os.environ["WEBHOOK_CA"])
    settings.admission.managed = "auto.kopf.dev"


@kopf.on.validate("stable.example.com", "v1", "crontabs")
def check_schedule(spec, **_):  # type: ignore[no-untyped-def]
    if spec.get("cronSpec") == "never":
        raise kopf.AdmissionError("cronSpec 'never' is not a schedule", code=400)


@kopf.on.mutate("stable.example.com", "v1", "crontabs")
def default_image(spec, patch, **_):  # type: ignore[no-untyped-def]
    if "image" not in spec:
        patch.spec["image"] = "busybox"
