"""The upstream definitions (k8py.api.schema): every one there, each parsed when first read.

All 638 parsed hold 2.6 MB and an API server reads a few dozen, so a
definition is parsed the first time it is asked for and the same object is
returned from then on; listing them, counting them and finding a kind's
definition parse none.
"""

from __future__ import annotations

from k8py.api import schema


def test_a_definition_is_parsed_when_first_read_and_the_same_object_after():
    definitions = schema.LazyDefinitions({"a.B": '{"type": "object", "properties": {"x": {"type": "string"}}}', "a.C": "{"},
                                         {("", "v1", "B"): "a.B"})
    assert list(definitions) == ["a.B", "a.C"] and len(definitions) == 2 and "a.C" in definitions
    assert schema.gvk_definition_name("", "v1", "Pod") == "io.k8s.api.core.v1.Pod"
    assert definitions.gvk[("", "v1", "B")] == "a.B"
    first = definitions["a.B"]
    assert first == {"type": "object", "properties": {"x": {"type": "string"}}}
    assert definitions.get("a.B") is first and definitions.get("a.D") is None
    # "a.C" is not JSON: nothing above read it


def test_the_upstream_definitions_are_all_there_and_resolve():
    definitions = schema.definitions()
    assert len(definitions) > 600
    pod = schema.definition("io.k8s.api.core.v1.Pod")
    assert pod is not None and pod is schema.definition("io.k8s.api.core.v1.Pod")
    assert {"group": "", "kind": "Pod", "version": "v1"} in pod["x-kubernetes-group-version-kind"]
    spec = schema.resolve(pod["properties"]["spec"])
    assert spec is schema.definition("io.k8s.api.core.v1.PodSpec")
    assert schema.gvk_definition_name("apps", "v1", "Deployment") == "io.k8s.api.apps.v1.Deployment"
