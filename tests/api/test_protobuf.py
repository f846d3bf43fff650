"""k8py.api.protobuf: Kubernetes protobuf bodies decode to upstream's JSON shapes.

The bodies are built by hand with the small encoder below, field numbers from
upstream's 1.32 ``generated.proto``; one body is the exact bytes kubectl
v1.32.4 sends for ``kubectl create deployment d1 --image=nginx``.
"""

from __future__ import annotations

import base64
import importlib.util
import sys
from pathlib import Path

import pytest

from k8py.api import protobuf, protobuf_wire
from k8py.api.protobuf import ProtobufError, decode_message, decode_object, go_duration, message_name

META = "k8s.io.apimachinery.pkg.apis.meta.v1."
ROOT = Path(__file__).resolve().parents[2]


# -- a minimal protobuf encoder --------------------------------------------


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative ints are ten-byte two's complement, as Go writes them
    out = bytearray()
    while True:
        low = n & 0x7F
        n >>= 7
        if n:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def num(field: int, value: int) -> bytes:
    return varint(field << 3) + varint(value)


def ld(field: int, payload: bytes | str) -> bytes:
    data = payload.encode() if isinstance(payload, str) else payload
    return varint(field << 3 | 2) + varint(len(data)) + data


def entry(field: int, key: str, value: bytes | str) -> bytes:
    return ld(field, ld(1, key) + ld(2, value))


def envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    type_meta = ld(1, api_version) + ld(2, kind)
    return protobuf.MAGIC + ld(1, type_meta) + ld(2, raw) + ld(3, "") + ld(4, "")


def object_meta(name: str, **labels: str) -> bytes:
    """As gogo writes it: every value field present, the zero Time as empty bytes."""
    out = ld(1, name) + ld(2, "") + ld(3, "") + ld(4, "") + ld(5, "") + ld(6, "") + num(7, 0) + ld(8, b"")
    return out + b"".join(entry(11, k, v) for k, v in labels.items())


def time_(seconds: int, nanos: int = 0) -> bytes:
    return num(1, seconds) + num(2, nanos)


def int_or_string(value: int | str) -> bytes:
    if isinstance(value, int):
        return num(1, 0) + num(2, value) + ld(3, "")
    return num(1, 1) + num(2, 0) + ld(3, value)


T_2026 = 1796025600  # 2026-11-30T08:00:00Z


# -- objects ----------------------------------------------------------------


def test_configmap_decodes_to_its_json_form():
    raw = ld(1, object_meta("c1", app="web")) + entry(2, "a", "b") + entry(2, "empty", "") + num(4, 0)
    obj = decode_object(envelope("v1", "ConfigMap", raw))
    assert obj == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c1", "creationTimestamp": None, "labels": {"app": "web"}},
        "data": {"a": "b", "empty": ""},
        "immutable": False,  # a pointer: present means set, even to false
    }
    assert list(obj)[:2] == ["apiVersion", "kind"]


def test_secret_binary_data_becomes_base64():
    blob = bytes([0, 255, 16, 10])
    raw = ld(1, object_meta("s1")) + entry(2, "bin", blob) + entry(2, "none", b"") + entry(4, "plain", "text") + ld(3, "Opaque")
    obj = decode_object(envelope("v1", "Secret", raw))
    assert obj["data"] == {"bin": base64.b64encode(blob).decode(), "none": ""}
    assert base64.b64decode(obj["data"]["bin"]) == blob
    assert obj["stringData"] == {"plain": "text"}
    assert obj["type"] == "Opaque"


def deployment_bytes() -> bytes:
    probe = ld(1, ld(2, ld(1, "/healthz") + ld(2, int_or_string("http")))) + num(2, 5) + num(3, 0)
    resources = entry(1, "cpu", ld(1, "500m")) + entry(1, "memory", ld(1, "1Gi")) + entry(2, "cpu", ld(1, "0"))
    container = (
        ld(1, "web") + ld(2, "nginx:1.27") + ld(5, "")
        + ld(6, ld(1, "") + num(2, 0) + num(3, 8080) + ld(4, "TCP") + ld(5, ""))
        + ld(8, resources) + ld(10, probe)
    )  # fmt: skip
    template = ld(1, object_meta("", app="web")) + ld(2, ld(2, container) + ld(3, "Always"))
    rolling = ld(1, int_or_string(0)) + ld(2, int_or_string("25%"))
    spec = num(1, 0) + ld(3, template) + ld(4, ld(1, "RollingUpdate") + ld(2, rolling)) + num(5, 0)
    condition = ld(1, "Available") + ld(2, "True") + ld(6, time_(T_2026, 999_999_999)) + ld(7, b"") + ld(4, "") + ld(5, "")
    status = num(1, 3) + ld(6, condition)
    return envelope("apps/v1", "Deployment", ld(1, object_meta("web")) + ld(2, spec) + ld(3, status))


def test_deployment_quantities_int_or_strings_and_times():
    obj = decode_object(deployment_bytes())
    spec = obj["spec"]
    assert spec["replicas"] == 0  # pointer zero kept
    assert "minReadySeconds" not in spec  # value zero means unset
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": "25%"}}
    container = spec["template"]["spec"]["containers"][0]
    assert container["resources"] == {"limits": {"cpu": "500m", "memory": "1Gi"}, "requests": {"cpu": "0"}}
    assert container["ports"] == [{"containerPort": 8080, "protocol": "TCP"}]
    assert "workingDir" not in container
    # ProbeHandler is a Go embedded struct: JSON flattens httpGet into the probe
    assert container["livenessProbe"] == {"httpGet": {"path": "/healthz", "port": "http"}, "initialDelaySeconds": 5}
    assert spec["template"]["metadata"] == {"creationTimestamp": None, "labels": {"app": "web"}}
    condition = obj["status"]["conditions"][0]
    assert condition["lastUpdateTime"] == "2026-11-30T08:00:00Z"  # Time keeps whole seconds
    assert condition["lastTransitionTime"] is None  # the zero Time is null in JSON
    assert obj["status"]["observedGeneration"] == 3


def test_kubectl_create_deployment_bytes_decode_like_its_json():
    body = bytes.fromhex(
        "6b3873000a150a0761707073"
        "2f7631120a4465706c6f796d656e7412a7010a1d0a0264311200"
        "1a0022002a00320038004200"
        "5a090a036170701202643112780801120b0a090a03617070120264311a5f0a1b0a0012001a0022002a00320038004200"
        "5a090a03617070120264311240122"
        "20a056e67696e7812056e67696e782a0042006a0072008001008801009001"
        "00a201001a00320042004a00520058006000680082010"
        "08a01009a0100c2010022020a00280038001a0c080010001800200028003800"
        "1a00220"
        "0"
    )
    assert decode_object(body) == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d1", "creationTimestamp": None, "labels": {"app": "d1"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "d1"}},
            "template": {
                "metadata": {"creationTimestamp": None, "labels": {"app": "d1"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx", "resources": {}}]},
            },
            "strategy": {},
        },
        "status": {},
    }


def test_microtime_keeps_microseconds_and_event_fields():
    raw = (
        ld(1, object_meta("e1"))
        + ld(2, ld(1, "Pod") + ld(3, "p1"))
        + ld(3, "Started")
        + ld(10, time_(T_2026, 123_456_789))
        + num(8, 2)
    )
    obj = decode_object(envelope("v1", "Event", raw))
    assert obj["eventTime"] == "2026-11-30T08:00:00.123456Z"
    assert obj["involvedObject"] == {"kind": "Pod", "name": "p1"}
    assert obj["count"] == 2


def test_events_v1_event_uses_the_events_package():
    raw = ld(1, object_meta("e2")) + ld(2, time_(T_2026, 5_000)) + ld(4, "kubelet") + ld(7, "Pulled")
    obj = decode_object(envelope("events.k8s.io/v1", "Event", raw))
    assert obj["eventTime"] == "2026-11-30T08:00:00.000005Z"
    assert (obj["reportingController"], obj["reason"]) == ("kubelet", "Pulled")


def test_volume_sources_and_local_object_references_are_inlined():
    config_map = ld(1, ld(1, "settings")) + num(3, 420)
    pod_spec = ld(1, ld(1, "conf") + ld(2, ld(19, config_map)))
    obj = decode_message(pod_spec, "k8s.io.api.core.v1.PodSpec")
    assert obj == {"volumes": [{"name": "conf", "configMap": {"name": "settings", "defaultMode": 420}}]}


def test_managed_fields_carry_fields_v1_as_json():
    managed = ld(1, "kubectl") + ld(2, "Update") + ld(3, "v1") + ld(4, time_(T_2026)) + ld(6, "FieldsV1") + ld(7, ld(1, b'{"f:data":{".":{}}}'))
    meta = ld(1, "c1") + ld(17, managed)
    obj = decode_message(meta, META + "ObjectMeta")
    assert obj["managedFields"] == [
        {
            "manager": "kubectl",
            "operation": "Update",
            "apiVersion": "v1",
            "time": "2026-11-30T08:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {".": {}}},
        }
    ]


def test_raw_extension_is_the_embedded_json_value():
    raw = ld(1, object_meta("rev1")) + ld(2, ld(1, b'{"spec":{"template":{"x":1}}}')) + num(3, 7)
    obj = decode_object(envelope("apps/v1", "ControllerRevision", raw))
    assert obj["data"] == {"spec": {"template": {"x": 1}}}
    assert obj["revision"] == 7


def test_raw_extension_that_is_not_json_is_refused():
    raw = ld(1, object_meta("rev1")) + ld(2, ld(1, b"\x01\x02not json"))
    with pytest.raises(ProtobufError, match="not JSON"):
        decode_object(envelope("apps/v1", "ControllerRevision", raw))


def test_negative_numbers_and_repeated_ints_packed_or_not():
    unpacked = num(2, -1) + num(4, 1000) + num(4, 2000)
    assert decode_message(unpacked, "k8s.io.api.core.v1.PodSecurityContext") == {"runAsUser": -1, "supplementalGroups": [1000, 2000]}
    packed = ld(4, varint(1000) + varint(2000)) + num(4, 3000)
    assert decode_message(packed, "k8s.io.api.core.v1.PodSecurityContext") == {"supplementalGroups": [1000, 2000, 3000]}


def test_named_slice_types_are_json_lists():
    resource = ld(1, "pods") + ld(3, "Pod") + num(2, 1) + ld(4, ld(1, "get") + ld(1, "list"))
    assert decode_message(resource, META + "APIResource") == {"name": "pods", "kind": "Pod", "namespaced": True, "verbs": ["get", "list"]}


def test_unknown_field_numbers_are_skipped():
    raw = ld(1, object_meta("c1")) + entry(2, "a", "b") + ld(99, "future") + num(98, 5)
    assert decode_object(envelope("v1", "ConfigMap", raw))["data"] == {"a": "b"}


def test_the_last_occurrence_of_a_singular_field_wins():
    raw = ld(1, ld(1, "first") + ld(1, "second"))
    assert decode_object(envelope("v1", "Namespace", raw))["metadata"] == {"name": "second"}


def test_duration_forms():
    assert decode_message(num(1, 90 * 10**9), META + "Duration") == "1m30s"
    assert [go_duration(n) for n in (0, 1500, 1_500_000, 3_723_500_000_000, -5 * 10**9, 3600 * 10**9)] == [
        "0s", "1.5µs", "1.5ms", "1h2m3.5s", "-5s", "1h0m0s",
    ]  # fmt: skip


def test_message_names_follow_upstream_packages():
    assert message_name("apps/v1", "Deployment") == "k8s.io.api.apps.v1.Deployment"
    assert message_name("v1", "Pod") == "k8s.io.api.core.v1.Pod"
    assert message_name("coordination.k8s.io/v1", "Lease") == "k8s.io.api.coordination.v1.Lease"
    assert message_name("v1", "DeleteOptions") == META + "DeleteOptions"
    assert message_name("apps/v1", "Widget") is None
    assert message_name("", "Pod") is None


# -- malformed input --------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"kind":"ConfigMap"}', "prefix"),
        (protobuf.MAGIC + b"\x0a\x05ab", "past the end"),
        (protobuf.MAGIC + b"\x08\xff\xff", "truncated varint"),
        (envelope("v1", "Widget", b""), "Kind=Widget"),
        (envelope("v1", "", b""), "no kind"),
        (envelope("v1", "ConfigMap", ld(1, ld(1, b"\xff\xfe"))), "UTF-8"),
        (envelope("v1", "ConfigMap", ld(1, num(1, 5))), "arrived as a number"),
        (envelope("v1", "ConfigMap", b"\x0b"), "wire type 3"),
    ],
)
def test_malformed_bodies_raise_protobuf_error(body, message):
    with pytest.raises(ProtobufError, match=message):
        decode_object(body)


def test_a_content_encoding_is_refused():
    body = protobuf.MAGIC + ld(1, ld(1, "v1") + ld(2, "ConfigMap")) + ld(2, b"") + ld(3, "gzip")
    with pytest.raises(ProtobufError, match="content encoding"):
        decode_object(body)


# -- the table --------------------------------------------------------------


def test_every_message_reference_in_the_table_resolves():
    table = protobuf._table()
    special = set(protobuf._SPECIAL)
    for name, fields in table.items():
        for number, (json_name, kind, type_, label) in fields.items():
            assert label in (protobuf.OPTIONAL, protobuf.REPEATED, protobuf.VALUE), (name, number)
            if kind in ("message", "inline"):
                assert type_ in table or type_ in special, (name, json_name, type_)
            elif kind == "map":
                assert type_ in table or type_ in special or type_ in protobuf_wire._NUMERIC or type_ in ("string", "bytes")
            else:
                assert kind in protobuf_wire._NUMERIC or kind in ("string", "bytes"), (name, json_name, kind)
    for kind in ("Pod", "Service", "ConfigMap", "Secret", "Namespace", "ServiceAccount", "Node", "Binding"):
        assert f"k8s.io.api.core.v1.{kind}" in table
    for name in ("apps.v1.Deployment", "batch.v1.Job", "batch.v1.CronJob", "autoscaling.v1.Scale", "policy.v1.Eviction",
                 "coordination.v1.Lease", "discovery.v1.EndpointSlice", "events.v1.Event"):  # fmt: skip
        assert f"k8s.io.api.{name}" in table


def _generator():
    spec = importlib.util.spec_from_file_location("gen_protobuf_fields", ROOT / "scripts" / "gen_protobuf_fields.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


def test_the_generator_parses_proto_text(tmp_path):
    gen = _generator()
    text = '''
    /* licence */
    syntax = "proto2";
    package k8s.io.api.core.v1;
    import "k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto";
    option go_package = "k8s.io/api/core/v1";

    // Volume has a name; "quotes // in comments" are fine.
    message Volume {
      optional string name = 1 [(gogoproto.nullable) = false];
      optional VolumeSource volumeSource = 2 [(gogoproto.nullable) = false];
    }
    message VolumeSource {
      optional EmptyDirVolumeSource emptyDir = 2;
    }
    message EmptyDirVolumeSource {
      optional string medium = 1;
      map<string, bytes> blobs = 3;
      repeated Outer.Inner inner = 4;
    }
    message Outer {
      message Inner { optional int64 n = 1; }
      oneof choice { string x = 2; }
    }
    '''
    folder = tmp_path / "k8s.io" / "api" / "core" / "v1"
    folder.mkdir(parents=True)
    (folder / "generated.proto").write_text(text)
    table, _ = gen.build_table(gen.load_protos(tmp_path), ("k8s.io.api.core.v1",))
    assert table["k8s.io.api.core.v1.Volume"] == {
        "1": ["name", "string", "", protobuf.VALUE],
        "2": ["volumeSource", "inline", "k8s.io.api.core.v1.VolumeSource", protobuf.VALUE],
    }
    assert table["k8s.io.api.core.v1.EmptyDirVolumeSource"] == {
        "1": ["medium", "string", "", protobuf.OPTIONAL],
        "3": ["blobs", "map", "bytes", protobuf.OPTIONAL],
        "4": ["inner", "message", "k8s.io.api.core.v1.Outer.Inner", protobuf.REPEATED],
    }
    assert table["k8s.io.api.core.v1.Outer.Inner"] == {"1": ["n", "int64", "", protobuf.OPTIONAL]}
    assert table["k8s.io.api.core.v1.Outer"] == {"2": ["x", "string", "", protobuf.OPTIONAL]}
