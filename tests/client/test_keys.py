"""Object keys, their inverse, and tombstones."""

from __future__ import annotations

from typing import Any

import pytest

from k8py.client.keys import DeletedFinalStateUnknown, KeyFuncError, object_key, split_key


@pytest.mark.parametrize(
    ("obj", "key"),
    [
        ({"metadata": {"name": "web-0", "namespace": "default"}}, "default/web-0"),
        ({"metadata": {"name": "node-1"}}, "node-1"),
        ({"metadata": {"name": "node-1", "namespace": ""}}, "node-1"),
        (DeletedFinalStateUnknown("ns/gone", None), "ns/gone"),
        (DeletedFinalStateUnknown("ns/gone", {"metadata": {"name": "other", "namespace": "x"}}), "ns/gone"),
        ("explicit/key", "explicit/key"),
    ],
)
def test_object_key(obj: Any, key: str) -> None:
    assert object_key(obj) == key


@pytest.mark.parametrize("obj", [{}, {"metadata": {}}, {"metadata": {"name": ""}}, 42, None])
def test_object_without_a_name_has_no_key(obj: Any) -> None:
    with pytest.raises(KeyFuncError):
        object_key(obj)


@pytest.mark.parametrize(
    ("key", "parts"),
    [("default/web-0", ("default", "web-0")), ("node-1", ("", "node-1"))],
)
def test_split_key_inverts_object_key(key: str, parts: tuple[str, str]) -> None:
    assert split_key(key) == parts


@pytest.mark.parametrize("key", ["", "/", "a/", "/b", "a/b/c"])
def test_split_key_rejects_malformed_keys(key: str) -> None:
    with pytest.raises(ValueError):
        split_key(key)
