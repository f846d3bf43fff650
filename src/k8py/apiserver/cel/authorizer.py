"""Kubernetes' authorizer library: ``authorizer.group('apps').resource('deployments').check('get').allowed()``.

Upstream (``k8s.io/apiserver/pkg/cel/library/authz.go``), for admission
policies and webhook matchConditions::

    authorizer.path(<string>) PathCheck           authorizer.group(<string>) GroupCheck
    authorizer.serviceAccount(<ns>, <name>) Authorizer   (checks as that service account)
    <GroupCheck>.resource(<string>) ResourceCheck
    <ResourceCheck>.subresource(<string>), .namespace(<string>), .name(<string>),
        .fieldSelector(<string>), .labelSelector(<string>) ResourceCheck
    <PathCheck|ResourceCheck>.check(<verb>) Decision
    <Decision>.allowed() bool, .reason() string, .errored() bool, .error() string
    authorizer.requestResource ResourceCheck      (the request's group, resource, ...)

The values are one-field messages (:mod:`.types`) holding JSON: who asks
and what. A path check is typed ``ResourceCheck`` here (cel-cpp tells Python
overloads apart by runtime kind only, so ``check`` has one overload for
both): ``authorizer.path('/x').resource('y')`` type-checks here and not
upstream.

Authorizing is asynchronous and an evaluation is not, so :func:`evaluate`
runs the program in rounds: ``check`` answers from the decisions already
known and, for one not known, records it and fails the evaluation; the
caller's ``authorize`` decides the recorded checks and the program runs
again, until it needs no new decision (at most :data:`MAX_ROUNDS`).
Decisions are per evaluation, never cached across requests.

Layering: this module knows no authorizer; a check reaches the caller as a
plain dict (``user``, ``verb``, ``path`` or ``group``/``resource``/...).
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson
from cel_expr_python import cel

from k8py.apiserver.cel import types
from k8py.apiserver.cel.errors import EvaluationError

__all__ = ["extension", "authorizer_value", "request_resource_value", "evaluate", "Authorize", "MAX_ROUNDS",
           "AUTHORIZER_TYPE", "RESOURCE_CHECK_TYPE"]

T = cel.Type
AUTHORIZER_TYPE = "kubernetes.authorization.Authorizer"
GROUP_CHECK_TYPE = "kubernetes.authorization.GroupCheck"
RESOURCE_CHECK_TYPE = "kubernetes.authorization.ResourceCheck"
DECISION_TYPE = "kubernetes.authorization.Decision"
MAX_ROUNDS = 16
_PENDING = "k8py: authorization decision pending"

#: (allowed, reason, error) for a check -> what the authorizer said
Authorize = Callable[[dict[str, Any]], Awaitable[tuple[bool, str, str]]]


class _Round:
    __slots__ = ("decisions", "pending")

    def __init__(self, decisions: dict[bytes, tuple[bool, str, str]]) -> None:
        self.decisions = decisions
        self.pending: dict[bytes, dict[str, Any]] = {}


_ROUND: contextvars.ContextVar[_Round | None] = contextvars.ContextVar("k8py_cel_authorizer_round", default=None)


def _load(message: Any) -> dict[str, Any]:
    return orjson.loads(message.value) if message.value else {}


def _dump(type_name: str, data: Mapping[str, Any]) -> Any:
    return types.new_message(type_name, orjson.dumps(data, option=orjson.OPT_SORT_KEYS).decode())


def authorizer_value(user: Mapping[str, Any]) -> Any:
    """The ``authorizer`` variable for a request by ``user`` (UserInfo as the API writes it)."""
    return _dump(AUTHORIZER_TYPE, {"user": dict(user)})


def request_resource_value(user: Mapping[str, Any], *, group: str, version: str, resource: str, subresource: str,
                           namespace: str, name: str) -> Any:
    """The ``authorizer.requestResource`` variable."""
    return _dump(RESOURCE_CHECK_TYPE, {"user": dict(user), "group": group, "version": version, "resource": resource,
                                       "subresource": subresource, "namespace": namespace, "name": name})


def _path(authz: Any, path: str) -> Any:
    return _dump(RESOURCE_CHECK_TYPE, {**_load(authz), "path": path})


def _group(authz: Any, group: str) -> Any:
    return _dump(GROUP_CHECK_TYPE, {**_load(authz), "group": group})


def _service_account(authz: Any, namespace: str, name: str) -> Any:
    user = {"username": f"system:serviceaccount:{namespace}:{name}",
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"]}
    return _dump(AUTHORIZER_TYPE, {"user": user})


def _resource(group_check: Any, resource: str) -> Any:
    return _dump(RESOURCE_CHECK_TYPE, {**_load(group_check), "resource": resource})


def _setter(key: str) -> Callable[[Any, str], Any]:
    def set_field(check: Any, value: str) -> Any:
        data = _load(check)
        if "path" in data:
            raise ValueError(f"{key} is not available on a path check")
        return _dump(RESOURCE_CHECK_TYPE, {**data, key: value})
    return set_field


def _check(check: Any, verb: str) -> Any:
    data = {**_load(check), "verb": verb}
    current = _ROUND.get()
    if current is None:
        raise ValueError("authorizer checks are not available here")
    key = orjson.dumps(data, option=orjson.OPT_SORT_KEYS)
    decision = current.decisions.get(key)
    if decision is None:
        current.pending[key] = data
        raise ValueError(_PENDING)
    return _dump(DECISION_TYPE, {"allowed": decision[0], "reason": decision[1], "error": decision[2]})


def _decision(field: str) -> Callable[[Any], Any]:
    def read(decision: Any) -> Any:
        data = _load(decision)
        if field == "errored":
            return bool(data.get("error"))
        return data.get(field) if field == "allowed" else str(data.get(field) or "")
    return read


async def evaluate(run: Callable[[], Any], authorize: Authorize | None) -> Any:
    """``run()`` (a synchronous evaluation) in rounds, deciding the checks it asks for with ``authorize``."""
    decisions: dict[bytes, tuple[bool, str, str]] = {}
    for _ in range(MAX_ROUNDS):
        current = _Round(decisions)
        token = _ROUND.set(current)
        try:
            return run()
        except EvaluationError:
            if not current.pending or authorize is None:
                raise
        finally:
            _ROUND.reset(token)
        for key, data in current.pending.items():
            decisions[key] = await authorize(data)
    raise EvaluationError(f"more than {MAX_ROUNDS} rounds of authorizer checks")


def extension() -> cel.CelExtension:
    authz, group, check, decision = (T(AUTHORIZER_TYPE), T(GROUP_CHECK_TYPE), T(RESOURCE_CHECK_TYPE),
                                     T(DECISION_TYPE))

    def member(name: str, result: Any, params: list[Any], impl: Any) -> cel.FunctionDecl:
        return cel.FunctionDecl(name, [cel.Overload(f"k8py_authz_{name}", result, params, is_member=True, impl=impl)])

    return cel.CelExtension("k8py.authz", [
        member("path", check, [authz, T.STRING], _path),
        member("group", group, [authz, T.STRING], _group),
        member("serviceAccount", authz, [authz, T.STRING, T.STRING], _service_account),
        member("resource", check, [group, T.STRING], _resource),
        *(member(name, check, [check, T.STRING], _setter(name))
          for name in ("subresource", "namespace", "name", "fieldSelector", "labelSelector")),
        member("check", decision, [check, T.STRING], _check),
        member("allowed", T.BOOL, [decision], _decision("allowed")),
        member("reason", T.STRING, [decision], _decision("reason")),
        member("errored", T.BOOL, [decision], _decision("errored")),
        member("error", T.STRING, [decision], _decision("error")),
    ])
