"""Image references: parsing, normalising, and whether a registry serves them.

The grammar is distribution's (``github.com/distribution/reference``)::

    reference := name [ ":" tag ] [ "@" digest ]
    name      := [domain "/"] path-component ("/" path-component)*
    domain    := host [":" port]      (a first component with "." or ":", or "localhost")
    tag       := [\\w][\\w.-]{0,127}
    digest    := algorithm ":" hex

A name without a domain is Docker Hub's (``docker.io``), and a one-component
path there is under ``library/``; no tag and no digest means ``latest``.
Anything else is ``InvalidImageName`` with upstream's message.

Which references the node pulls: every one with an explicit domain except
the well-known public registries in ``catalog_registries`` (this machine
has no route to them; the process runtime's host-image catalog stands in
for their images). Implicit Docker Hub names (``busybox``) go to the
catalog too. Plain HTTP is used only for loopback registries
(``localhost``, ``127.0.0.0/8``, ``[::1]``), as containerd does.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from k8py.kubelet.runtime.protocols import RuntimeErrorStatus

__all__ = ["Reference", "parse", "DEFAULT_CATALOG_REGISTRIES", "is_loopback_host"]

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?"
_REF = re.compile(
    rf"^(?:(?P<domain>{_DOMAIN})/)?(?P<path>{_COMPONENT}(?:/{_COMPONENT})*)"
    r"(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}))?$"
)

DOCKER_HUB = "docker.io"
#: registries whose images the host-image catalog stands in for (no route to them here)
DEFAULT_CATALOG_REGISTRIES = ("docker.io", "index.docker.io", "registry-1.docker.io", "registry.k8s.io", "k8s.gcr.io",
                              "gcr.io", "quay.io", "ghcr.io", "mcr.microsoft.com", "public.ecr.aws")


@dataclass(frozen=True)
class Reference:
    domain: str
    path: str
    tag: str = ""
    digest: str = ""

    @property
    def repository(self) -> str:
        """``127.0.0.1:5000/team/app`` (the name images are listed under)."""
        return f"{self.domain}/{self.path}"

    @property
    def name(self) -> str:
        """The reference as the node lists it: ``repo:tag``, or ``repo@digest`` when pinned without a tag."""
        if self.tag or not self.digest:
            return f"{self.repository}:{self.tag or 'latest'}"
        return f"{self.repository}@{self.digest}"

    @property
    def object(self) -> str:
        """What the manifest endpoint is asked for: the digest if pinned, else the tag."""
        return self.digest or self.tag or "latest"

    def scheme(self) -> str:
        return "http" if is_loopback_host(self.domain) else "https"


def is_loopback_host(domain: str) -> bool:
    host = domain
    if host.startswith("["):
        host = host[1:host.find("]")]
    elif ":" in host:
        host = host.rsplit(":", 1)[0]
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def invalid(image: str) -> RuntimeErrorStatus:
    return RuntimeErrorStatus("InvalidImageName", f'Failed to apply default image tag "{image}": couldn\'t parse image name '
                              f'"{image}": invalid reference format')


def parse(image: str) -> Reference:
    m = _REF.match(image or "")
    if not m:
        raise invalid(image)
    domain, path = m.group("domain"), m.group("path")
    if domain is None:
        first, _, rest = path.partition("/")
        domain, path = DOCKER_HUB, path if rest else f"library/{path}"
    elif not ("." in domain or ":" in domain or domain == "localhost" or domain.startswith("[")):
        # "team/app": the first component is part of the path on Docker Hub
        domain, path = DOCKER_HUB, f"{domain}/{path}"
    if len(f"{domain}/{path}") > 255:
        raise invalid(image)
    return Reference(domain, path, m.group("tag") or "", (m.group("digest") or "").lower())


def pulled_from_registry(image: str, catalog_registries: tuple[str, ...] | frozenset[str] = DEFAULT_CATALOG_REGISTRIES) -> bool:
    """Whether ``image`` names a registry the node pulls from (see the module docstring).

    Raises InvalidImageName for a malformed reference."""
    ref = parse(image)
    explicit = image.split("/", 1)[0] == ref.domain and "/" in image
    return explicit and ref.domain not in catalog_registries
