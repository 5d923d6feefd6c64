"""Images to the host: ``runtime.display_image`` and matplotlib figures.

matplotlib is optional. When user code imports it, it finds ``MPLBACKEND`` pointing at
:mod:`bridge_sandbox_client._mpl_backend` (Agg rendering, plus a ``show()`` that sends figures),
set before any user code runs. Figures still open when an execution ends are sent too.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable
from typing import Any

from bridge_protocol import Display

__all__ = ["MAX_IMAGE_BYTES", "Displayer", "active", "configure_matplotlib", "sniff_mime"]

MAX_IMAGE_BYTES = 15 * 1024 * 1024
"""Largest image that fits in one frame (the wire limit is 16 MiB including the envelope)."""

_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
_EXTENSIONS = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".svg": "image/svg+xml",
}


def sniff_mime(data: bytes) -> str | None:
    """The image MIME type of ``data`` from its magic bytes, if recognised."""
    for magic, mime in _SIGNATURES:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def configure_matplotlib() -> None:
    """Point matplotlib at our backend and a writable config dir, before user code runs."""
    os.environ["MPLBACKEND"] = "module://bridge_sandbox_client._mpl_backend"
    configured = os.environ.get("MPLCONFIGDIR")
    if configured and _usable_directory(configured):
        return
    # The image's root is read-only and a configured dir may be unusable (podman copies an
    # image's /tmp content, root-owned, into the tmpfs); without a writable one matplotlib warns
    # on stderr about making a temporary cache directory on every import.
    import tempfile

    fallback = os.path.join(tempfile.gettempdir(), f"matplotlib-{os.getuid()}")
    if _usable_directory(fallback):
        os.environ["MPLCONFIGDIR"] = fallback


def _usable_directory(path: str) -> bool:
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return False
    return os.path.isdir(path) and os.access(path, os.W_OK | os.X_OK)


class Displayer:
    """Sends ``Display`` frames for the current execution."""

    def __init__(self, send: Callable[[Display], None], execution_id: Callable[[], str]) -> None:
        self._send = send
        self._execution_id = execution_id

    def display_image(self, data_or_path: Any, mime: str | None = None) -> None:
        """Send an image: PNG/JPEG/GIF/WebP bytes, a path to such a file, a tool ``Image``
        result, or a matplotlib figure."""
        data, name = self._load(data_or_path)
        if mime is None and hasattr(data_or_path, "mime_type"):
            mime = str(data_or_path.mime_type)
        if mime is None:
            mime = sniff_mime(data)
        if mime is None and name is not None:
            mime = _EXTENSIONS.get(os.path.splitext(name)[1].lower())
        if mime is None:
            raise ValueError(
                "cannot tell the image type (not PNG, JPEG, GIF or WebP): pass mime='image/...'"
            )
        if not mime.startswith("image/"):
            raise ValueError(f"mime must be an image type like 'image/png', got {mime!r}")
        if len(data) > MAX_IMAGE_BYTES:
            raise ValueError(
                f"image of {len(data)} bytes is larger than the limit of {MAX_IMAGE_BYTES}"
            )
        self._send(Display(execution_id=self._execution_id(), mime=mime, data=data))
        if hasattr(data_or_path, "savefig"):
            # Shown now: closing it keeps the end-of-execution sweep of open figures from sending
            # it a second time (a closed figure can still be saved or displayed again by hand).
            pyplot = sys.modules.get("matplotlib.pyplot")
            if pyplot is not None:
                pyplot.close(data_or_path)

    @staticmethod
    def _load(source: Any) -> tuple[bytes, str | None]:
        if isinstance(source, (bytes, bytearray, memoryview)):
            return bytes(source), None
        if isinstance(source, (str, os.PathLike)):
            path = os.fspath(source)
            with open(path, "rb") as f:
                return f.read(), str(path)
        data = getattr(source, "data", None)
        if isinstance(data, bytes):
            return data, None
        if hasattr(source, "savefig"):
            buffer = io.BytesIO()
            source.savefig(buffer, format="png", bbox_inches="tight")
            return buffer.getvalue(), None
        raise TypeError(
            f"display_image() takes image bytes, a file path, an Image or a figure, "
            f"not {type(source).__name__}"
        )

    def send_open_figures(self) -> None:
        """Send every open matplotlib figure as PNG and close it (no-op without pyplot)."""
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is None:
            return
        for number in list(pyplot.get_fignums()):
            figure = pyplot.figure(number)
            try:
                self.display_image(figure, "image/png")
            finally:
                pyplot.close(figure)


_active: Displayer | None = None


def active() -> Displayer | None:
    """The displayer of this process (used by the matplotlib backend's ``show``)."""
    return _active


def set_active(displayer: Displayer | None) -> None:
    """Make ``displayer`` the one ``plt.show()`` sends to."""
    global _active
    _active = displayer
