"""What an engine's image store (podman or docker, through its command line) holds under a name,
and a pull by digest through that engine.

Both engines print ``image inspect`` as a JSON list. Their image ID is the digest of the image's
config, which names every layer by content; podman prints it as bare hex, docker with its
``sha256:`` prefix. The manifest digests an image is known by are the ``@sha256:`` suffixes of
its ``RepoDigests`` (podman also prints its own ``Digest``); docker has none for an image it
loaded from an archive.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass

from bridge_image._run import Progress, require_tool, run_streamed
from bridge_image._trust import tls_verify

__all__ = ["ENGINE_HINTS", "PULL_TIMEOUT", "EngineStore", "StoredImage"]

ENGINE_HINTS = {
    "podman": "install podman (apt-get install podman)",
    "docker": "install the docker command line (apt-get install docker.io)",
}
PULL_TIMEOUT = 1800.0
"""Bound on one pull (a 1 GB image over a slow link); past it the engine's client is killed."""
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class StoredImage:
    """One image of an engine's store, as ``image inspect`` describes it."""

    id: str
    """``sha256:`` of the image's config: its content, whatever its names."""
    digests: frozenset[str]
    """Manifest digests (``sha256:``) the engine knows the image by."""


def _stored(raw: object) -> StoredImage | None:
    if not isinstance(raw, list) or not raw or not isinstance(raw[0], dict):
        return None
    data = raw[0]
    image_id = str(data.get("Id") or "")
    image_id = image_id if image_id.startswith("sha256:") else f"sha256:{image_id}"
    named = [str(item).rpartition("@")[2] for item in data.get("RepoDigests") or ()]
    digests = {d for d in (*named, str(data.get("Digest") or "")) if _DIGEST.fullmatch(d)}
    return StoredImage(image_id, frozenset(digests))


class EngineStore:
    """The image store of ``podman`` or ``docker`` on this host, through its command line."""

    def __init__(self, engine: str) -> None:
        self.engine = engine

    def _tool(self) -> str:
        return require_tool(self.engine, ENGINE_HINTS.get(self.engine, f"install {self.engine}"))

    def inspect(self, name: str) -> StoredImage | None:
        """The image ``name`` resolves to (a tag, an ID, ``repo@sha256:``), or None.

        Raises :class:`~bridge_image.errors.MissingTool` when the engine's command line is not
        on this host (a remote engine: its store cannot be read from here).
        """
        done = subprocess.run(
            [self._tool(), "image", "inspect", name], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            return None
        try:
            return _stored(json.loads(done.stdout))
        except ValueError:
            return None

    def pull(self, reference: str, *, progress: Progress | None) -> None:
        """Pull ``reference`` (``registry/path@sha256:...``) through the engine, output streamed.

        The engine checks that the manifest it receives hashes to the digest it asked for.
        Raises :class:`~bridge_image.errors.BuildFailed` quoting the engine's last lines.
        """
        argv = [self._tool(), "pull"]
        if self.engine == "podman":
            # docker's daemon decides this itself (loopback registries are plain HTTP to it).
            argv.append(f"--tls-verify={str(tls_verify(reference)).lower()}")
        run_streamed(
            [*argv, reference], progress=progress, what=f"pull of {reference}", timeout=PULL_TIMEOUT
        )
