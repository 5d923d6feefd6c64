"""Errors of bridge-image: one root, one subclass per failure domain."""

from __future__ import annotations

__all__ = ["BuildFailed", "DigestMismatch", "ImageError", "MissingInput", "MissingTool"]


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
