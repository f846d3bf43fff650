"""Compiling CEL: cel-go's error text, the program cache, declared variables."""

import pytest

from k8py.apiserver import cel


def test_a_compiled_program_is_cached_per_expression_and_variables():
    first = cel.compile("self.a == 1", ["self"])
    assert cel.compile("self.a == 1", ["self"]) is first
    assert cel.compile("self.a == 1", ["self", "oldSelf"]) is not first


def test_an_undeclared_variable_is_a_compile_error_in_cel_go_format():
    with pytest.raises(cel.CompileError) as err:
        cel.compile("object.x == 1", ["self"])
    assert str(err.value) == (
        "ERROR: <input>:1:1: undeclared reference to 'object' (in container '')\n"
        " | object.x == 1\n"
        " | ^"
    )


def test_a_syntax_error_points_at_the_column():
    with pytest.raises(cel.CompileError) as err:
        cel.compile("self.items.all(x, x > 0", ["self"])
    message = str(err.value)
    assert message.startswith("ERROR: <input>:1:24: Syntax error: missing ')' at '<EOF>'")
    assert message.endswith(" | self.items.all(x, x > 0\n | .......................^")


def test_a_type_error_is_found_at_compile_time():
    with pytest.raises(cel.CompileError) as err:
        cel.compile("size(self) + 'a'", ["self"])
    assert "found no matching overload for '_+_' applied to '(int, string)'" in str(err.value)
    assert "INVALID_ARGUMENT" not in str(err.value)


def test_typed_variables_are_checked():
    program = cel.compile("name.startsWith('web-')", {"name": "string"})
    assert program.evaluate({"name": "web-1"}) is True
    assert program.return_type == "bool"
    with pytest.raises(cel.CompileError):
        cel.compile("name + 1", {"name": "string"})
    with pytest.raises(ValueError, match="unknown CEL type 'str'"):
        cel.compile("name", {"name": "str"})


def test_an_unknown_function_is_refused():
    with pytest.raises(cel.CompileError, match="undeclared reference to 'nosuch'"):
        cel.compile("self.nosuch()", ["self"])
