"""The supervisor makes the PKI in a child of its own (cryptography stays out of the long-lived process).

Run in a child interpreter, as ``k8py up`` runs it: the supervisor forks, and
the test process has threads (forking it could copy a held lock)."""

from __future__ import annotations

import os
import subprocess
import sys

from k8py.cluster.pki import ClusterPKI

SCRIPT = """
import asyncio, os, sys
from k8py.cluster.spec import ClusterSpec
from k8py.cluster.supervisor import StartError, Supervisor

async def main(data):
    supervisor = Supervisor(ClusterSpec(data_dir=data, port=0, zygote=False, proxy=False, dns=False))
    try:
        await supervisor._make_pki()
    except StartError as err:
        print("refused:", err)
    os.remove(os.path.join(data, "pki"))
    await supervisor._make_pki()
    print("made; cryptography here:", "cryptography.x509" in sys.modules)

asyncio.run(main(sys.argv[1]))
"""


def test_the_certificates_are_made_by_a_child_and_its_failure_is_the_start_error(tmp_path):
    data = tmp_path / "cluster"
    data.mkdir()
    (data / "pki").write_text("not a directory")  # where the certificates go: the first attempt cannot make them
    run = subprocess.run([sys.executable, "-c", SCRIPT, str(data)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    refused, made = run.stdout.splitlines()
    assert refused.startswith("refused: could not make the cluster's certificates and kubeconfigs in") and "pki" in refused
    assert made == "made; cryptography here: False"  # made by the child: nothing imported in the supervisor
    pki = ClusterPKI(str(data))
    assert os.path.exists(pki.ca_file) and os.path.exists(pki.kubeconfig("scheduler"))
