"""Errors of bridge-image: one root, one subclass per failure domain."""

from __future__ import annotations

__all__ = [
    "BuildFailed",
    "DigestMismatch",
    "ImageError",
    "IncompatibleImage",
    "MissingInput",
    "MissingTool",
    "PublishFailed",
    "PullRefused",
    "ReleaseRecordError",
]


class ImageError(Exception):
    """Root of every error bridge-image raises; the message says what to do next."""


class MissingTool(ImageError):
    """A host tool the build needs (podman, mmdebstrap, git, pip) is not installed."""


class MissingInput(ImageError):
    """A build input is absent: the repository, a Containerfile, a base image."""


class BuildFailed(ImageError):
    """A build step (wheel build, download, bootstrap, ``podman build``) exited non-zero."""


class DigestMismatch(ImageError):
    """``verify``: a rebuild from the same inputs produced a different image."""


class ReleaseRecordError(ImageError):
    """The release record (published references, digests, signing key) is missing a field or
    malformed."""


class PublishFailed(ImageError):
    """``release``: pushing or signing an image failed; the record was not written."""


class PullRefused(ImageError):
    """A pull did not give the released image: wrong digest, missing or bad signature, or the
    registry could not be read. Nothing was tagged, nothing runs."""


class IncompatibleImage(ImageError):
    """``verify --image``: the image lacks an intact sandbox client, or speaks no protocol
    version of this bridge."""
