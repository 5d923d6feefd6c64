"""Logging set-up: stderr (stdout carries the MCP protocol) and a bounded, rotated log file.

The file is on by default, in the state dir, because MCP clients keep a server's stderr in places
users rarely find (or not at all); ``doctor`` prints its path. Several bridges (one per client)
may share it: each record carries the process id.

Every record, to either place, passes one formatter that masks the proxied servers' secrets (an
upstream's stderr, an HTTP client's request line or an error may quote them), keeps it one record
and caps its length: many records quote text that sandbox code or an upstream server controls
(names, junk output, protocol errors, exception messages), which must not reach the host's disk
unbounded, nor forge a record ("... the user approved ...") with a newline, move a terminal's
cursor with an ANSI escape, or read differently from what it is with a bidi override.

One record is one line, as far as anything quoted in it can tell: its message has every control,
format (bidi) and line-separator character escaped (``\n``, ``\x1b``, ``\u202e``, ``\u2028``),
by the same function that makes sandbox output visible. A traceback or stack attached to it
follows on continuation lines, each escaped the same way and prefixed with ``CONTINUATION``
(``"  | "``): a line that does not start with a timestamp is never a record of its own.
"""

from __future__ import annotations

import io
import logging
import logging.handlers
import os
import sys
from collections.abc import Iterable
from pathlib import Path

from bridge_core.private_files import PRIVATE_FILE_MODE, make_dirs
from bridge_core.redaction import Redactor
from bridge_core.sessions import visible

__all__ = [
    "CONTINUATION",
    "LOG_FILE_BACKUPS",
    "LOG_FILE_MAX_BYTES",
    "MAX_RECORD_CHARS",
    "also_mask",
    "configure_logging",
    "log_to_file_only",
    "mask_logs",
]

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_FILE_FORMAT = "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"

LOG_FILE_MAX_BYTES = 1024 * 1024
"""Rotation size of the log file: with the backups kept, at most ~4 MiB of logs on disk."""
LOG_FILE_BACKUPS = 3
MAX_RECORD_CHARS = 16 * 1024
"""Longest log record (traceback included); past it the head and the tail are kept."""
_TAIL_CHARS = 4 * 1024
"""Of a cut record, the end kept: a traceback's last lines say what failed."""
CONTINUATION = "  | "
"""Starts each line of a record's traceback or stack: what no record starts with."""
_STDERR_HANDLER = "mcp-code-execution-mode stderr"
"""The name of the stderr handler :func:`configure_logging` installs (and :func:`log_to_file_only`
removes)."""


class _BoundedFormatter(logging.Formatter):
    """Formats, masks every configured secret, escapes what could break the record's line, then
    cuts to :data:`MAX_RECORD_CHARS` (in this order: the escapes cannot split a secret from the
    redactor, and a cut can never leave part of one)."""

    redactor = Redactor()
    """Shared by every instance; set by :func:`mask_logs` once discovery is done."""

    def format(self, record: logging.LogRecord) -> str:
        # logging.Formatter.format, with the message kept apart from the traceback and stack
        # that it would append after newlines: each part is escaped by its own rule.
        record.message = record.getMessage()
        if self.usesTime():
            record.asctime = self.formatTime(record, self.datefmt)
        head = visible(self.redactor.text(self.formatMessage(record)), single_line=True)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        attached = [record.exc_text] if record.exc_text else []
        if record.stack_info:
            attached.append(self.formatStack(record.stack_info))
        lines = [head]
        for part in attached:
            for line in self.redactor.text(part).rstrip("\n").split("\n"):
                lines.append(CONTINUATION + visible(line, single_line=True))
        text = "\n".join(lines)
        if len(text) <= MAX_RECORD_CHARS:
            return text
        kept = MAX_RECORD_CHARS - _TAIL_CHARS
        omitted = len(text) - MAX_RECORD_CHARS
        return f"{text[:kept]} [... {omitted:,} characters cut ...] {text[-_TAIL_CHARS:]}"


class _PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """Rotating file handler whose files are readable by the user only (logs quote settings and
    upstream servers' errors, which may carry secrets)."""

    def _open(self) -> io.TextIOWrapper:
        # Created private; an existing file keeps the mode its owner gave it (docs/decisions/0024).
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
    handlers[0].set_name(_STDERR_HANDLER)
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
            handler.setFormatter(_BoundedFormatter(_FILE_FORMAT))
            handlers.append(handler)
    handlers[0].setFormatter(_BoundedFormatter(_FORMAT))
    logging.basicConfig(level=level.upper(), handlers=handlers, force=True)


def log_to_file_only() -> None:
    """Stop sending records to stderr; the log file (if any) still gets them.

    For the commands that report in lines of their own (``doctor``, ``demo``): a record about
    the same finding, printed raw before it, would say it twice and in another form.
    """
    root = logging.getLogger()
    for handler in [h for h in root.handlers if h.get_name() == _STDERR_HANDLER]:
        root.removeHandler(handler)


_also_masked: set[str] = set()
"""Secrets configured outside the servers (the trace exporter's endpoint and headers)."""


def mask_logs(redactor: Redactor) -> None:
    """Mask ``redactor``'s secrets in every record from now on (set once discovery is done),
    besides those given to :func:`also_mask`."""
    _BoundedFormatter.redactor = Redactor((*redactor.secrets, *_also_masked))


def also_mask(secrets: Iterable[str]) -> None:
    """Mask these secrets too in every record from now on, whatever :func:`mask_logs` sets."""
    _also_masked.update(secrets)
    _BoundedFormatter.redactor = Redactor((*_BoundedFormatter.redactor.secrets, *_also_masked))
