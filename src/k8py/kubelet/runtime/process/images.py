"""The image catalog: what an image name means to the process runtime.

There are no image layers here: an image is a *recipe* for the process a
container runs, keyed by the image's repository name with the registry and
tag stripped (``docker.io/library/busybox:1.36`` → ``busybox``,
``registry.k8s.io/pause:3.9`` → ``pause``):

- base images (busybox, alpine, debian, ubuntu, python, …) have no
  entrypoint: the container's command/args run on the host (``args`` with
  no ``command`` are the argv, as an empty ENTRYPOINT makes them);
- ``python`` has ``python`` and ``python3``: k8py's own interpreter when its
  directory holds a ``python`` (see ``_python_env``);
- ``pause`` sleeps forever;
- ``nginx`` runs the built-in web server (:mod:`.nginx`) on the pod's IP,
  serving ``/usr/share/nginx/html``: the image ships that directory (its
  ``image_dirs``) with nginx's index.html and 50x.html, a writable copy per
  container as an image layer is, unless a volume is mounted there;
- a YAML file (``--image-catalog``) maps more names:
  ``{name: {entrypoint: [...], cmd: [...], env: {K: V}, workingDir: /x}}``.

A name that is not a valid image reference is ``InvalidImageName``; one the
catalog does not know fails to pull (``ErrImagePull``), as a missing image
does upstream.

The argv rule is the OCI one: ``command`` replaces the entrypoint, ``args``
replace the image's cmd; argv = (command or entrypoint) + (args or cmd when
no command was given, else args).
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import yaml

from k8py.kubelet.runtime.process import launcher, nginx
from k8py.kubelet.runtime.protocols import Image, RuntimeErrorStatus

__all__ = ["ImageRecipe", "ImageCatalog", "repository_name", "validate_reference"]

# a loose form of the distribution reference grammar
_REFERENCE = re.compile(
    r"^(?:[a-zA-Z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:[._-]+[a-z0-9]+)*(?:/[a-z0-9]+(?:[._-]+[a-z0-9]+)*)*"
    r"(?::[\w][\w.-]{0,127})?(?:@sha256:[0-9a-f]{64})?$"
)

_BASE_IMAGES = {
    "busybox": ["sh"], "alpine": ["/bin/sh"], "debian": ["bash"], "ubuntu": ["bash"],
    "fedora": ["bash"], "centos": ["bash"], "bash": ["bash"], "python": ["python3"],
    "agnhost": ["sh"], "distroless": ["sh"], "curl": ["sh"], "perl": ["perl"],
}


def _python_env() -> dict[str, str]:
    """The python image has ``python`` as well as ``python3`` on its PATH; a host often has only
    ``python3``. The interpreter running k8py is the image's python: its directory comes first on
    the PATH when it holds a ``python`` (a venv's or pyenv's bin), so both names are that one."""
    bindir = os.path.dirname(sys.executable)
    if not os.access(os.path.join(bindir, "python"), os.X_OK):
        return {}
    return {"PATH": f"{bindir}:{launcher.DEFAULT_PATH}"}


@dataclass(frozen=True)
class ImageRecipe:
    name: str
    entrypoint: Sequence[str] = ()
    cmd: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    working_dir: str = ""
    #: directories the image ships, {container path: {file name: content}}: each container gets
    #: its own writable copy there (its layer), hidden by a volume mounted at the same path
    image_dirs: Mapping[str, Mapping[str, bytes]] = field(default_factory=dict)

    def argv(self, command: Sequence[str], args: Sequence[str]) -> list[str]:
        if command:
            return [*command, *args]
        return [*self.entrypoint, *(args if args else self.cmd)]


def validate_reference(image: str) -> None:
    if not image or not _REFERENCE.match(image):
        raise RuntimeErrorStatus("InvalidImageName", f'Failed to apply default image tag "{image}": couldn\'t parse image name "{image}": invalid reference format')


def repository_name(image: str) -> str:
    """The last path component of the repository, without tag or digest."""
    ref = image.split("@", 1)[0]
    last = ref.rsplit("/", 1)[-1]
    return last.split(":", 1)[0]


def normalized_tag(image: str) -> str:
    """``busybox`` → ``docker.io/library/busybox:latest``, as the node lists images."""
    ref = image.split("@", 1)[0]
    first = ref.split("/", 1)[0]
    if "/" not in ref:
        ref = f"docker.io/library/{ref}"
    elif "." not in first and ":" not in first and first != "localhost":
        ref = f"docker.io/{ref}"
    if ":" not in ref.rsplit("/", 1)[-1]:
        ref += ":latest"
    return ref


class ImageCatalog:
    def __init__(self, extra: Mapping[str, Any] | None = None) -> None:
        self._recipes: dict[str, ImageRecipe] = {}
        for name, cmd in _BASE_IMAGES.items():
            self._recipes[name] = ImageRecipe(name, cmd=cmd)
        self._recipes["python"] = ImageRecipe("python", cmd=["python3"], env=_python_env())
        self._recipes["pause"] = ImageRecipe("pause", entrypoint=["sleep", "infinity"])
        self._recipes["nginx"] = ImageRecipe(
            # the file itself, isolated and without site (it needs only the standard library):
            # no site-packages' .pth files and no k8py package imports at each start, a quarter
            # less memory for every nginx pod
            "nginx", entrypoint=[sys.executable, "-I", "-S", os.path.abspath(nginx.__file__)],
            image_dirs={nginx.DOCROOT: {"index.html": nginx.WELCOME, "50x.html": nginx.ERROR_PAGE}},
        )
        for name, spec in (extra or {}).items():
            spec = spec or {}
            self._recipes[name] = ImageRecipe(
                name,
                entrypoint=list(spec.get("entrypoint") or ()),
                cmd=list(spec.get("cmd") or ()),
                env={str(k): str(v) for k, v in (spec.get("env") or {}).items()},
                working_dir=str(spec.get("workingDir") or ""),
            )

    @classmethod
    def from_file(cls, path: str | None) -> "ImageCatalog":
        if not path:
            return cls()
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f) or {}
        if not isinstance(data, dict):
            raise ValueError(f"image catalog {path} must map image names to recipes")
        return cls(data)

    def resolve(self, image: str) -> ImageRecipe:
        validate_reference(image)
        recipe = self._recipes.get(repository_name(image))
        if recipe is None:
            raise RuntimeErrorStatus(
                "ErrImagePull",
                f'failed to pull and unpack image "{normalized_tag(image)}": not found in the process runtime\'s image '
                f"catalog (known: {', '.join(sorted(self._recipes))}; add it with --image-catalog)",
            )
        return recipe

    def image_for(self, image: str) -> Image:
        recipe = self.resolve(image)
        digest = hashlib.sha256(repr(recipe).encode()).hexdigest()
        return Image(id=f"sha256:{digest}", repo_tags=[normalized_tag(image)],
                     repo_digests=[f"{normalized_tag(image).rsplit(':', 1)[0]}@sha256:{digest}"], size=1024)
