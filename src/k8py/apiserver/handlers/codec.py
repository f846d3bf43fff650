"""Request bodies in, response bodies out: media types and encodings.

Requests: JSON (the default), YAML, or Kubernetes protobuf bodies (kubectl's
generator commands send ``application/vnd.kubernetes.protobuf`` and do not
fall back); protobuf is decoded by :mod:`k8py.api.protobuf` into the same
JSON-shaped dict a JSON body would give, ``apiVersion``/``kind`` taken from
its envelope (the store then checks them against the URL, as for JSON). The
four PATCH media types are read raw and handed to the patch engines.

Responses: JSON by default; a ``meta.k8s.io`` Table when ``Accept`` asks for
``as=Table`` (kubectl get); ``PartialObjectMetadata(List)`` for
``as=PartialObjectMetadata[List]``; YAML when asked for it alone. Never
protobuf: every protobuf-first ``Accept`` that clients send also lists JSON,
which is what they get.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
import yaml

from k8py.api import protobuf
from k8py.api.errors import BadRequest, NotAcceptable, UnsupportedMediaType

__all__ = [
    "JSON",
    "YAML",
    "PROTOBUF",
    "PATCH_TYPES",
    "APPLY_PATCH",
    "ResponseFormat",
    "negotiate",
    "decode_body",
    "media_type_of",
]

JSON = "application/json"
YAML = "application/yaml"
PROTOBUF = protobuf.MEDIA_TYPE
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    APPLY_PATCH,
)

_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C loader is ~10x faster


class _YamlLoader(_Base):  # type: ignore[misc, valid-type]
    """Safe YAML without the timestamp type: dates stay strings, as in JSON."""


_YamlLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def media_type_of(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def decode_body(raw: bytes, content_type: str | None) -> Any:
    """A JSON, YAML or protobuf request body as a Python value. 400 / 415 otherwise."""
    media = media_type_of(content_type) or JSON
    if media in (JSON, "*/*", "application/*+json") or media.endswith("+json"):
        try:
            return orjson.loads(raw) if raw.strip() else None
        except orjson.JSONDecodeError as err:
            raise BadRequest(f"the request body is not valid JSON: {err}") from None
    if media in (YAML, "application/x-yaml", "text/yaml", APPLY_PATCH):
        try:
            return yaml.load(raw, Loader=_YamlLoader) if raw.strip() else None
        except yaml.YAMLError as err:
            raise BadRequest(f"the request body is not valid YAML: {err}") from None
    if media == PROTOBUF:
        try:
            return protobuf.decode_object(raw) if raw else None
        except protobuf.ProtobufError as err:
            raise BadRequest(f"the request body is not a valid Kubernetes protobuf object: {err}") from None
    raise UnsupportedMediaType(
        f'the body of the request was in an unknown format - accepted media types include: '
        f"{JSON}, {YAML}, {PROTOBUF}"
    )


@dataclass(frozen=True, slots=True)
class ResponseFormat:
    #: "json", "yaml", "table", "partial"
    kind: str
    #: for tables: "None" / "Metadata" / "Object" (from includeObject)
    include_object: str = "Metadata"
    content_type: str = JSON


_JSON_RESPONSE = ResponseFormat("json")


def _params(part: str) -> tuple[str, dict[str, str]]:
    pieces = [p.strip() for p in part.split(";")]
    params: dict[str, str] = {}
    for p in pieces[1:]:
        k, _, v = p.partition("=")
        params[k.strip().lower()] = v.strip()
    return pieces[0].lower(), params


def negotiate(accept: str | None, *, include_object: str = "") -> ResponseFormat:
    """Pick the response format from an Accept header (first acceptable wins)."""
    if not accept:
        return _JSON_RESPONSE
    seen_unacceptable = False
    for part in accept.split(","):
        media, params = _params(part)
        if not media:
            continue
        as_ = params.get("as", "")
        if media in (JSON, "application/*", "*/*", "application/json-seq"):
            if as_ == "Table" and params.get("g") == "meta.k8s.io" and params.get("v") in ("v1", "v1beta1"):
                return ResponseFormat("table", include_object or "Metadata")
            if as_ in ("PartialObjectMetadata", "PartialObjectMetadataList") and params.get("g") == "meta.k8s.io":
                return ResponseFormat("partial")
            if as_ in ("", "APIGroupDiscoveryList"):
                return _JSON_RESPONSE
            seen_unacceptable = True
            continue
        if media in (YAML, "application/x-yaml", "text/yaml") and not as_:
            return ResponseFormat("yaml", content_type=YAML)
        seen_unacceptable = True
    if seen_unacceptable:
        raise NotAcceptable(
            "only the following media types are accepted: application/json, application/yaml, "
            "application/json;as=Table;v=v1;g=meta.k8s.io"
        )
    return _JSON_RESPONSE


def encode(value: Any, fmt: ResponseFormat = _JSON_RESPONSE) -> bytes:
    if fmt.kind == "yaml":
        return yaml.safe_dump(value, sort_keys=False).encode()
    return orjson.dumps(value)
