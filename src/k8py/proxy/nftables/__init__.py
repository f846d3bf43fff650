"""The nftables backend of ``k8py proxy`` (kube-proxy's ``--proxy-mode=nftables``).

- :mod:`.ruleset` — pure: the proxier's table in, the text of one ``nft -f``
  transaction out (the node's own table, rebuilt whole);
- :mod:`.backend` — :class:`NftablesBackend`: applies it atomically, deletes
  the table on close.
"""
