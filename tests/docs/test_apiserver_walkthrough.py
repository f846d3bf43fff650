"""docs/01-apiserver.md: the Verification section, run against a real server process."""

from __future__ import annotations

import asyncio

import aiohttp

from tests.support.kube import Kubectl
from tests.support.servers import ServerProcess

CONFIGMAP = """apiVersion: v1
kind: ConfigMap
metadata: {name: walkthrough}
data: {greeting: hello}
"""

STALE = """apiVersion: v1
kind: ConfigMap
metadata: {name: walkthrough, resourceVersion: "1"}
data: {greeting: stale}
"""


async def _watch_lines(url: str, seconds: int) -> list[bytes]:
    async with aiohttp.ClientSession() as session:
        async with session.get(url + f"&timeoutSeconds={seconds}") as resp:
            body = await resp.read()
    return [line for line in body.split(b"\n") if line]


async def _list_rv(url: str) -> str:
    async with aiohttp.ClientSession() as session:
        async with session.get(url) as resp:
            return (await resp.json())["metadata"]["resourceVersion"]


def test_walkthrough_verification_steps(tmp_path):
    with ServerProcess(str(tmp_path / "demo")) as server:
        assert server.ready_seconds < 5
        kubectl = Kubectl(server.url, str(tmp_path / "home"))

        namespaces = kubectl.run("get", "namespaces").stdout.splitlines()
        assert namespaces[0].split() == ["NAME", "STATUS", "AGE"]
        assert [line.split()[:2] for line in namespaces[1:]] == [
            ["default", "Active"],
            ["kube-node-lease", "Active"],
            ["kube-public", "Active"],
            ["kube-system", "Active"],
        ]

        assert kubectl.run("apply", "-f", "-", input=CONFIGMAP).stdout.strip() == "configmap/walkthrough created"
        assert kubectl.run("get", "configmap", "walkthrough", "-o", "jsonpath={.data.greeting}").stdout == "hello"

        loop = asyncio.new_event_loop()
        rv = loop.run_until_complete(_list_rv(f"{server.url}/api/v1/namespaces/default/configmaps"))
        url = f"{server.url}/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}"
        watch = loop.create_task(_watch_lines(url, 2))
        loop.run_until_complete(asyncio.sleep(0.3))
        patched = kubectl.run("patch", "configmap", "walkthrough", "--type=merge", "-p", '{"data":{"greeting":"hi"}}')
        assert patched.stdout.strip() == "configmap/walkthrough patched"
        lines = loop.run_until_complete(watch)
        loop.close()
        assert len(lines) == 1 and lines[0].startswith(b'{"type":"MODIFIED","object":{"kind":"ConfigMap","apiVersion":"v1"')
        assert b'"data":{"greeting":"hi"}' in lines[0]

        stale = kubectl.run("replace", "-f", "-", input=STALE, check=False)
        assert stale.returncode == 1
        assert stale.stderr.strip() == (
            'Error from server (Conflict): error when replacing "STDIN": Operation cannot be fulfilled on '
            'configmaps "walkthrough": the object has been modified; please apply your changes to the latest '
            "version and try again"
        )
