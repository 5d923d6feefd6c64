"""Logging set-up: stderr only (stdout carries the MCP protocol), optionally a file too."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from bridge_core.private_files import PRIVATE_FILE_MODE, make_dirs

__all__ = ["configure_logging"]

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_logging(level: str, log_file: Path | None = None) -> None:
    """Send log records at ``level`` and above to stderr and, if given, to ``log_file``.

    A new log file is created 0600 (missing directories 0700): logs name servers, sessions and
    failures. An existing file keeps the mode its owner gave it (see docs/decisions.md).
    """
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file is not None:
        make_dirs(log_file.parent)
        # FileHandler would create it with the umask's mode: create it first, private.
        os.close(os.open(log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE_MODE))
        handlers.append(logging.FileHandler(log_file, encoding="utf-8"))
    logging.basicConfig(level=level.upper(), format=_FORMAT, handlers=handlers, force=True)
