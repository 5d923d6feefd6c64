"""Whether the configured sandbox image may run, decided once before the first sandbox starts.

One decision for podman and docker, from what the engine's store holds under the name and what
the release record pins:

* a name the release record lists (a released name, its reference or its pinned reference): the
  present image must be the pinned one (its manifest digest, or its image ID when the record
  has the config digest). Otherwise, with podman and pulls allowed, the released image is pulled
  by digest with its signature verified (:func:`bridge_image.pull.pull_released`), which moves
  the name to it; else it is refused, naming the expected and the found digest and the command
  that fixes it;
* ``registry/path@sha256:...`` (a digest reference the record does not list, e.g. a team's own
  image): the digest pins the content, so a missing image is pulled through the engine by that
  digest, and the stored image must then carry it;
* any other name is used as the store has it; missing, it is not pulled (a tag pins nothing) and
  the answer says the command that gets it.

:func:`supply_image` acts and returns an :class:`ImageSupply` whose :attr:`~ImageSupply.case`
says which of these applied; refusals are returned, not raised, so ``doctor`` can print them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from bridge_image._engine import EngineStore, StoredImage
from bridge_image._run import Progress
from bridge_image.errors import ImageError, MissingTool
from bridge_image.names import DEFAULT_IMAGE, IMAGE_COMMAND, SLIM_IMAGE
from bridge_image.pull import PulledImage, pull_released
from bridge_image.release import PublishedImage, Release

__all__ = ["ImageCase", "ImageStore", "ImageSupply", "digest_of", "matches", "supply_image"]

ImageCase = Literal[
    "verified", "pulled", "digest-pinned", "unknown-tag", "refused", "missing", "unchecked"
]
"""What was decided about the configured image:

* ``verified``: a released name, and the present image is the one the release pins;
* ``pulled``: a released name, pulled now by digest with its signature verified (it was missing,
  or another image had the name);
* ``digest-pinned``: configured as ``repo@sha256:...`` (not a released image): present, or
  pulled now by that digest (:attr:`ImageSupply.pulled`);
* ``unknown-tag``: neither released nor pinned by digest: run as the store has it, unchecked;
  when missing it is not pulled (not usable; the fix says how to get it);
* ``refused``: a released name held by another image that is not replaced, or a pull that
  failed its checks: nothing runs;
* ``missing``: a released or digest-pinned image that is not present and is not pulled here
  (``MCP_BRIDGE_IMAGE_PULL=never``, or a released image on docker);
* ``unchecked``: the engine's command line is not on this host (a remote engine): its store
  cannot be read from here, and the engine reports a missing image itself.
"""

_PINNED = re.compile(r"(?P<repo>[^@\s]+)@(?P<digest>sha256:[0-9a-f]{64})")
_USABLE: frozenset[ImageCase] = frozenset(
    {"verified", "pulled", "digest-pinned", "unknown-tag", "unchecked"}
)
_OWN_NAME = "localhost/my-sandbox:1"


@dataclass(frozen=True, slots=True)
class ImageSupply:
    """The decision about one image: which case applied, and what to tell the user."""

    case: ImageCase
    image: str
    detail: str
    """One line: what was found or done (for a log line or ``doctor``)."""
    fix: str = ""
    """The command(s) that make an unusable image usable; empty when it is usable."""
    pulled: bool = False
    """Whether this decision pulled the image."""
    image_id: str | None = None
    """``sha256:`` ID of the image that will run, when known."""

    @property
    def usable(self) -> bool:
        """Whether a sandbox may start from the image (``unknown-tag`` only when present)."""
        return self.case in _USABLE and not self.fix


class ImageStore(Protocol):
    """An engine's image store (:class:`bridge_image._engine.EngineStore`; a fake in tests)."""

    engine: str

    def inspect(self, name: str) -> StoredImage | None: ...

    def pull(self, reference: str, *, progress: Progress | None) -> None: ...


PullReleased = Callable[..., PulledImage]


def digest_of(image: str) -> tuple[str, str] | None:
    """``(repository, digest)`` of a ``repository@sha256:<hex>`` reference, else None."""
    found = _PINNED.fullmatch(image)
    return (found["repo"], found["digest"]) if found else None


def matches(stored: StoredImage, published: PublishedImage) -> bool:
    """Whether ``stored`` is the image ``published`` pins: same manifest digest, or (when the
    record has it) same config digest, i.e. same image ID."""
    return published.digest in stored.digests or (
        published.config is not None and stored.id == published.config
    )


def _found(stored: StoredImage) -> str:
    digests = ", ".join(sorted(stored.digests)[:4]) or "none"
    return f"image ID {stored.id}, manifest digests {digests}"


def _expected(published: PublishedImage) -> str:
    config = f" (image ID {published.config})" if published.config else ""
    return f"{published.digest}{config}"


def _release_fix(image: str, engine: str, pull: bool) -> str:
    get = f"`{IMAGE_COMMAND} pull --image {image}`"
    if engine == "docker":
        get = f"{get} then `podman save {image} | docker load`"
    own = (
        f"for an image you built yourself, give it a name of your own "
        f"(`{IMAGE_COMMAND} build --tag {_OWN_NAME}`) and set MCP_BRIDGE_IMAGE to it"
    )
    blocked = "" if pull or engine != "podman" else " (pulls are off: MCP_BRIDGE_IMAGE_PULL=never)"
    return f"get the released image: {get}{blocked}; or, {own}"


def _released(
    image: str,
    published: PublishedImage,
    release: Release,
    stored: StoredImage | None,
    store: ImageStore,
    *,
    pull: bool,
    progress: Progress | None,
    pull_release: PullReleased,
) -> ImageSupply:
    if stored is not None and matches(stored, published):
        return ImageSupply(
            "verified",
            image,
            f"{image} is {published.pinned} of release {release.version} ({stored.id[:19]})",
            image_id=stored.id,
        )
    engine = store.engine
    what = (
        f"{image} is not present"
        if stored is None
        else (
            f"{image} is present but is NOT the image release {release.version} pins: expected "
            f"{_expected(published)}, found {_found(stored)}"
        )
    )
    if engine != "podman" or not pull:
        # docker never pulls released images (their signatures are checked by skopeo into
        # podman's store: docs/decisions/0054); with pulls off nothing is fetched at all.
        return ImageSupply(
            "missing" if stored is None else "refused",
            image,
            what,
            _release_fix(image, engine, pull),
            image_id=stored.id if stored else None,
        )
    if progress:
        progress(f"{what}: pulling {published.pinned}")
    try:
        done = pull_release(release.local_name(image) or image, release, progress=progress)
    except ImageError as exc:
        refused = f"{what}; the pull was refused: {exc}"
        return ImageSupply("refused", image, refused, _release_fix(image, engine, pull))
    after = store.inspect(image)
    if after is None or not matches(after, published):
        # The name moved again between the pull and this look (another process): not trusted.
        shown = _found(after) if after else "no image"
        return ImageSupply(
            "refused",
            image,
            f"after pulling {published.pinned}, {image} is {shown}, expected "
            f"{_expected(published)}",
            _release_fix(image, engine, pull),
        )
    replaced = f"; replaced {_found(stored)}" if stored is not None else ""
    return ImageSupply(
        "pulled",
        image,
        f"pulled {done.published.pinned} (digest and signature verified) as {image}{replaced}",
        pulled=True,
        image_id=after.id,
    )


def _by_digest(
    image: str,
    repository: str,
    digest: str,
    stored: StoredImage | None,
    store: ImageStore,
    *,
    pull: bool,
    progress: Progress | None,
) -> ImageSupply:
    engine = store.engine
    command = f"`{engine} pull {image}`"
    if stored is not None and digest in stored.digests:
        return ImageSupply(
            "digest-pinned", image, f"{image} is present ({stored.id[:19]})", image_id=stored.id
        )
    if stored is not None:
        # An engine resolves a digest reference by digest; anything else is not this image.
        return ImageSupply(
            "refused",
            image,
            f"{engine} answers {image} with an image that does not carry {digest}: "
            f"{_found(stored)}",
            f"remove that name and pull by digest: {command}",
        )
    if not pull:
        return ImageSupply(
            "missing",
            image,
            f"{image} is not present and pulls are off (MCP_BRIDGE_IMAGE_PULL=never)",
            f"pull it on this host: {command}",
        )
    if "/" not in repository or repository.split("/", 1)[0] == "localhost":
        # A local name: no registry to pull from (``localhost/x`` is podman's local prefix).
        return ImageSupply(
            "missing",
            image,
            f"{image} is not present and names no registry to pull it from",
            f"load or build the image that has this digest into {engine}, or set "
            "MCP_BRIDGE_IMAGE to registry/path@sha256:...",
        )
    if progress:
        progress(f"{image} is not present: pulling it by digest through {engine}")
    try:
        store.pull(image, progress=progress)
    except ImageError as exc:
        fix = f"check the registry (and your login to it), then {command}"
        return ImageSupply("refused", image, f"the pull of {image} failed: {exc}", fix)
    after = store.inspect(image)
    if after is None or digest not in after.digests:
        shown = _found(after) if after else "no image"
        return ImageSupply(
            "refused", image, f"after pulling {image}, {engine} holds {shown}", command
        )
    return ImageSupply(
        "digest-pinned",
        image,
        f"pulled {image} by digest through {engine} ({after.id[:19]})",
        pulled=True,
        image_id=after.id,
    )


def _build_command(image: str) -> str:
    if image == DEFAULT_IMAGE:
        return f"`{IMAGE_COMMAND} build`"
    if image == SLIM_IMAGE:
        return f"`{IMAGE_COMMAND} build --slim`"
    return f"`{IMAGE_COMMAND} build --tag {image}` (the standard image; --slim for the slim one)"


def _unknown_fix(image: str, engine: str) -> str:
    build = _build_command(image)
    if image.startswith("localhost/") or "/" not in image:
        return f"build it: {build}, or set MCP_BRIDGE_IMAGE to an image you have"
    name, colon, tag = image.rpartition(":")
    repository = name if colon and "/" not in tag else image
    return (
        f"pull it yourself (`{engine} pull {image}`), or pin it by digest "
        f"(MCP_BRIDGE_IMAGE={repository}@sha256:<digest>; the bridge then pulls it), or build "
        f"it: {build}"
    )


def supply_image(
    image: str,
    *,
    engine: str,
    release: Release | None,
    pull: bool = True,
    progress: Progress | None = None,
    store: ImageStore | None = None,
    pull_release: PullReleased = pull_released,
) -> ImageSupply:
    """Decide whether ``image`` may run on ``engine`` (``podman`` or ``docker``), pulling it
    when that is what makes it usable; see the module's description.

    ``release`` is the release record (None: no image is released); ``pull`` False is
    ``MCP_BRIDGE_IMAGE_PULL=never``. Blocking (runs the engine's command line): call it from a
    worker thread. Refusals are returned (:attr:`ImageSupply.usable` False), not raised.
    """
    store = store or EngineStore(engine)
    try:
        stored = store.inspect(image)
    except MissingTool as exc:
        return ImageSupply(
            "unchecked",
            image,
            f"{image} was not checked: the engine's store cannot be read from this host ({exc})",
        )
    published = release.find(image) if release is not None else None
    if release is not None and published is not None:
        return _released(
            image, published, release, stored, store,
            pull=pull, progress=progress, pull_release=pull_release,
        )  # fmt: skip
    pinned = digest_of(image)
    if pinned is not None:
        return _by_digest(image, *pinned, stored, store, pull=pull, progress=progress)
    if stored is None:
        released = f"an image of release {release.version}" if release else "a released image"
        return ImageSupply(
            "unknown-tag",
            image,
            f"{image} is not present; it is neither {released} nor pinned by digest, so it "
            "is not pulled",
            _unknown_fix(image, store.engine),
        )
    return ImageSupply(
        "unknown-tag",
        image,
        f"{image} ({stored.id[:19]}) is neither released nor pinned by digest: run as present",
        image_id=stored.id,
    )
