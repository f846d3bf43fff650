"""Evaluating CEL against JSON objects: values, runtime errors as cel-go words them, cost."""

import datetime

import pytest

from k8py.apiserver import cel

OBJECT = {"metadata": {"name": "web-1", "labels": {"app": "web"}},
          "spec": {"replicas": 3, "ports": [80, 443], "ratio": 0.5, "paused": False, "image": None}}


@pytest.mark.parametrize("expression, expected", [
    ("object.metadata.name", "web-1"),
    ("object.spec.replicas * 2", 6),
    ("object.spec.ratio", 0.5),
    ("object.spec.image == null", True),
    ("object.spec.ports.all(p, p > 0) && object.spec.ports.exists_one(p, p == 80)", True),
    ("object.spec.ports.map(p, p + 1)", [81, 444]),
    ("object.spec.ports.filter(p, p > 100)", [443]),
    ("has(object.metadata.labels) && !has(object.metadata.annotations)", True),
    ("'app' in object.metadata.labels", True),
    ("object.metadata.labels", {"app": "web"}),
    ("{'a': [1, 2]}", {"a": [1, 2]}),
    ("b'ab'", b"ab"),
    ("duration('90s')", datetime.timedelta(seconds=90)),
    ("timestamp('2024-01-02T03:04:05Z').getFullYear()", 2024),
    ("oldObject == null", True),
])
def test_expressions_read_json_objects(expression, expected):
    program = cel.compile(expression, ["object", "oldObject"])
    assert program.evaluate({"object": OBJECT, "oldObject": None}) == expected


def test_a_missing_variable_evaluates_as_null():
    assert cel.compile("oldSelf == null", ["self", "oldSelf"]).evaluate({"self": 1}) is True


def test_an_integer_beyond_int64_is_read_as_a_double():
    assert cel.compile("self.n > 1.0e20", ["self"]).evaluate({"self": {"n": 2**70}}) is True


@pytest.mark.parametrize("expression, message", [
    ("self.missing == 1", "no such key: missing"),
    ("self.n / 0", "division by zero"),
    ("self.n % 0", "modulus by zero"),
    ("self.l[5]", "index '5' out of range in list size '2'"),
    ("9223372036854775807 + self.n", "integer overflow"),
    ("dyn(self.n) + 'a'", "no such overload"),
    ("int('x1')", "cannot convert string to int"),
    ("optional.none().value()", "optional.none() dereference"),
])
def test_runtime_errors_read_as_cel_go_prints_them(expression, message):
    with pytest.raises(cel.EvaluationError) as err:
        cel.compile(expression, ["self"]).evaluate({"self": {"n": 1, "l": [1, 2]}})
    assert str(err.value) == message


def test_cost_grows_with_the_data_a_comprehension_walks():
    program = cel.compile("self.all(x, x > 0)", ["self"])
    _, small = program.evaluate_with_cost({"self": [1] * 10})
    _, large = program.evaluate_with_cost({"self": [1] * 1000})
    assert small < large
    assert large >= 1000 * 2  # the condition and the step, per element
    strings = cel.compile("self.all(s, s.startsWith('a'))", ["self"])
    assert strings.runtime_cost({"self": ["a" * 1000] * 10}) > strings.runtime_cost({"self": ["a"] * 10})


def test_a_comprehension_past_the_per_call_limit_is_refused_without_running():
    program = cel.compile("self.all(x, self.all(y, x + y >= 0))", ["self"])
    with pytest.raises(cel.CostLimitError) as err:
        program.evaluate({"self": list(range(1000))})
    assert str(err.value) == "operation cancelled: actual cost limit exceeded"
    assert err.value.cost > cel.PER_CALL_LIMIT
    assert program.runtime_cost({"self": list(range(1000))}) > 1000 * 1000
    # a smaller list is within the limit; a caller may set its own
    assert program.evaluate({"self": list(range(10))}) is True
    with pytest.raises(cel.CostLimitError):
        program.evaluate({"self": list(range(10))}, cost_limit=50)


def test_a_comprehension_free_expression_costs_its_node_count():
    _, spent = cel.compile("self.a == 1 && self.b == 2", ["self"]).evaluate_with_cost({"self": {"a": 1, "b": 2}})
    assert 4 <= spent <= 10
