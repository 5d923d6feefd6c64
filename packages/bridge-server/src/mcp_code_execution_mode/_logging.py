"""Logging set-up: stderr only (stdout carries the MCP protocol), optionally a file too."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

__all__ = ["configure_logging"]

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_logging(level: str, log_file: Path | None = None) -> None:
    """Send log records at ``level`` and above to stderr and, if given, to ``log_file``."""
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_file, encoding="utf-8"))
    logging.basicConfig(level=level.upper(), format=_FORMAT, handlers=handlers, force=True)
