"""--token-auth-file: upstream's CSV, and clear errors for a file that cannot be used."""

from __future__ import annotations

import subprocess
import sys

import pytest

from k8py.apiserver.authn.token_file import StaticTokenAuthenticator, TokenFileError


async def test_columns_groups_and_a_later_duplicate_winning(tmp_path):
    path = tmp_path / "tokens.csv"
    path.write_text('t1,alice,u1,"a, b"\nt2, bob, u2\n\nt1,carol,u3\n')
    auth = StaticTokenAuthenticator.from_file(str(path))
    carol, bob = await auth.authenticate_token("t1"), await auth.authenticate_token("t2")
    assert (carol.name, carol.uid, carol.groups) == ("carol", "u3", ())
    assert (bob.name, bob.uid, bob.groups) == ("bob", "u2", ())
    assert await auth.authenticate_token("t3") is None
    path.write_text('t1,alice,u1,"a, b"\n')
    alice = await StaticTokenAuthenticator.from_file(str(path)).authenticate_token("t1")
    assert alice.groups == ("a", "b")


def test_too_few_columns_is_refused_with_upstreams_message(tmp_path):
    path = tmp_path / "tokens.csv"
    path.write_text("t1,alice\n")
    with pytest.raises(TokenFileError, match=r"must have at least 3 columns \(token, user name, user uid\), found 2"):
        StaticTokenAuthenticator.from_file(str(path))


def test_the_api_server_refuses_to_start_on_a_bad_token_file(tmp_path):
    path = tmp_path / "tokens.csv"
    path.write_text("only-a-token\n")
    result = subprocess.run([sys.executable, "-m", "k8py", "apiserver", "--data-dir", str(tmp_path / "d"), "--secure-port", "0",
                             "--token-auth-file", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "must have at least 3 columns" in result.stderr
