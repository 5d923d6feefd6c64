"""Logging set-up: stderr (stdout carries the MCP protocol) and a bounded, rotated log file.

The file is on by default, in the state dir, because MCP clients keep a server's stderr in places
users rarely find (or not at all); ``doctor`` prints its path. Several bridges (one per client)
may share it: each record carries the process id.
"""

from __future__ import annotations

import io
import logging
import logging.handlers
import os
import sys
from pathlib import Path

from bridge_core.private_files import PRIVATE_FILE_MODE, make_dirs

__all__ = ["LOG_FILE_BACKUPS", "LOG_FILE_MAX_BYTES", "configure_logging"]

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_FILE_FORMAT = "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"

LOG_FILE_MAX_BYTES = 1024 * 1024
"""Rotation size of the log file: with the backups kept, at most ~4 MiB of logs on disk."""
LOG_FILE_BACKUPS = 3


class _PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """Rotating file handler whose files are readable by the user only (logs quote settings and
    upstream servers' errors, which may carry secrets)."""

    def _open(self) -> io.TextIOWrapper:
        # Created private; an existing file keeps the mode its owner gave it (docs/decisions.md).
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE_MODE)
        stream = open(fd, "a", encoding=self.encoding, errors=self.errors)  # noqa: SIM115 - the handler owns it
        assert isinstance(stream, io.TextIOWrapper)
        return stream


def configure_logging(level: str, log_file: Path | None = None) -> None:
    """Send log records at ``level`` and above to stderr and, if given, to ``log_file``.

    A log file that cannot be opened is reported on stderr and skipped: logging must never be
    the reason the server does not start.
    """
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file is not None:
        try:
            make_dirs(log_file.parent)
            handler = _PrivateRotatingFileHandler(
                log_file,
                maxBytes=LOG_FILE_MAX_BYTES,
                backupCount=LOG_FILE_BACKUPS,
                encoding="utf-8",
            )
        except OSError as exc:
            print(
                f"mcp-code-execution-mode: cannot write the log file {log_file}: {exc} "
                "(set MCP_BRIDGE_LOG_FILE to another path, or off)",
                file=sys.stderr,
            )
        else:
            handler.setFormatter(logging.Formatter(_FILE_FORMAT))
            handlers.append(handler)
    handlers[0].setFormatter(logging.Formatter(_FORMAT))
    logging.basicConfig(level=level.upper(), handlers=handlers, force=True)
