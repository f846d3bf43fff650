"""The chain adds system:authenticated to an authenticator's user once per user it was handed, and
never hands one user's copy to another."""

from __future__ import annotations

from k8py.apiserver.authn.chain import AuthenticatorChain
from k8py.apiserver.authn.user import ALL_AUTHENTICATED, UserInfo


def test_a_kept_user_gets_its_one_copy_and_a_new_user_its_own():
    chain = AuthenticatorChain()
    alice = UserInfo("alice", uid="1", groups=("devs",))
    first, again = chain._authenticated(alice), chain._authenticated(alice)
    assert first is again
    assert first == UserInfo("alice", uid="1", groups=("devs", ALL_AUTHENTICATED))
    bob = UserInfo("bob", groups=("ops",), extra={"scopes": ("view",)})
    assert chain._authenticated(bob) == UserInfo("bob", groups=("ops", ALL_AUTHENTICATED), extra={"scopes": ("view",)})
    for i in range(3000):  # many users: bounded, each still its own
        user = UserInfo(f"u{i}")
        assert chain._authenticated(user).name == f"u{i}"
    assert len(chain._grouped) <= 1024
    assert chain._authenticated(alice) == first
