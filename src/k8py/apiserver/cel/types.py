"""The opaque CEL types of Kubernetes' libraries, as protobuf messages.

Why messages: cel-expr-python (cel-cpp) cannot carry an arbitrary Python
object through an evaluation, but it can carry a protobuf message of a type in
the environment's descriptor pool. So each Kubernetes object type
(``kubernetes.URL``, ``net.IP``, ``net.CIDR``, ``kubernetes.Quantity``) is a
one-field message built here at import time (no generated code, no .proto
file) and ``type(url('https://x'))`` prints ``kubernetes.URL`` as upstream.

Invariant: the single ``value`` field holds a *canonical* text, so the
message equality cel-cpp applies is upstream's semantic equality:
``quantity('1') == quantity('1000m')`` (both hold the exact fraction ``1/1``),
``ip('::1') == ip('0:0::1')``. The field is an implementation detail: an
expression that reads ``.value`` or builds ``net.IP{value: ...}`` gets no
promise from us.
"""

from __future__ import annotations

from typing import Any

from cel_expr_python import cel
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

__all__ = ["POOL", "URL", "IP", "CIDR", "QUANTITY", "FORMAT", "new_url", "new_ip", "new_cidr",
           "new_quantity", "new_format", "new_optional", "OPTIONAL", "new_message", "type_name", "file_protos"]

_OPAQUE = {"kubernetes": ["URL", "Quantity", "NamedFormat", "Optional"], "net": ["IP", "CIDR"],
           "kubernetes.authorization": ["Authorizer", "GroupCheck", "ResourceCheck", "Decision"]}



def file_protos() -> list[descriptor_pb2.FileDescriptorProto]:
    """The opaque types' files (a schema's type-checking pool adds them too)."""
    files = []
    for package, names in _OPAQUE.items():
        file = descriptor_pb2.FileDescriptorProto(name=f"k8py/cel/{package}.proto", package=package, syntax="proto3")
        for name in names:
            message = file.message_type.add(name=name)
            message.field.add(name="value", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                              label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
        files.append(file)
    return files


POOL = descriptor_pool.DescriptorPool()
for _file in file_protos():
    POOL.Add(_file)


def _message_class(full_name: str) -> Any:
    return message_factory.GetMessageClass(POOL.FindMessageTypeByName(full_name))


_URL = _message_class("kubernetes.URL")
_QUANTITY = _message_class("kubernetes.Quantity")
_IP = _message_class("net.IP")
_CIDR = _message_class("net.CIDR")
_FORMAT = _message_class("kubernetes.NamedFormat")
_OPTIONAL = _message_class("kubernetes.Optional")

URL = cel.Type("kubernetes.URL")
QUANTITY = cel.Type("kubernetes.Quantity")
IP = cel.Type("net.IP")
CIDR = cel.Type("net.CIDR")
FORMAT = cel.Type("kubernetes.NamedFormat")
OPTIONAL = cel.Type("kubernetes.Optional")


def new_url(text: str) -> Any:
    return _URL(value=text)


def new_quantity(canonical: str) -> Any:
    return _QUANTITY(value=canonical)


def new_ip(canonical: str) -> Any:
    return _IP(value=canonical)


def new_cidr(canonical: str) -> Any:
    return _CIDR(value=canonical)


def new_format(name: str) -> Any:
    return _FORMAT(value=name)


def new_optional(value: str | None) -> Any:
    """An optional a library function returns (cel-cpp takes none from Python):
    ``value`` holds a one-letter kind and the payload (``F<format name>``,
    ``E<errors joined by NUL>``), "" for none."""
    return _OPTIONAL(value=value or "")


def new_message(full_name: str, value: str) -> Any:
    """A message of one of the opaque types by its full name."""
    return _message_class(full_name)(value=value)


def type_name(message: Any) -> str:
    """``kubernetes.URL`` for a URL message (how results are rendered)."""
    return str(message.DESCRIPTOR.full_name)
