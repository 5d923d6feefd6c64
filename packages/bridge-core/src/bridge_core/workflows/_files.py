"""Workflows as plain ``.py`` files a person can review and commit: export and import.

A file is a header of ``# key: value`` comment lines, every value JSON (ASCII only, so a
description holding a newline or a bidi control stays one escaped line and cannot forge another
key or code), a line holding ``#`` alone, then the source exactly as saved::

    # mcp-code-execution-mode workflow
    # name: "monthly_report"
    # version: 2
    # description: "Sales of a month, summarised"
    # saved_at: "2026-12-04T21:07:00+00:00"
    # tools: ["filesystem.read_text_file"]
    #
    def monthly_report(month: str) -> str:
        ...

Import reads a file as text (never imports or runs it), takes the name and description from the
header and the source after it, and saves them through the same checks as a save from a sandbox
(the name, the bounds, one function parsed with :mod:`ast`). ``version``, ``saved_at`` and
``tools`` are for the reader: an imported file becomes the next version of its name (none when
a version already has the same source), and its tools are read from the source again.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from bridge_core.private_files import make_dirs, write_private
from bridge_core.workflows._limits import validate_name
from bridge_core.workflows._source import WorkflowError
from bridge_core.workflows._store import WorkflowStore, WorkflowVersion

__all__ = ["HEADER", "ImportOutcome", "export_workflows", "import_workflows", "render_file"]

HEADER = "# mcp-code-execution-mode workflow"
_END = "#"
_MAX_HEADER_LINES = 32
_MAX_HEADER_BYTES = 16 * 1024


def render_file(workflow: WorkflowVersion) -> str:
    """The text of ``workflow``'s file (header, then its source)."""
    fields = {
        "name": workflow.name,
        "version": workflow.version,
        "description": workflow.description,
        "saved_at": workflow.saved_at,
        "tools": list(workflow.facts.tools),
    }
    lines = [HEADER, *(f"# {key}: {json.dumps(value)}" for key, value in fields.items()), _END]
    return "\n".join(lines) + "\n" + workflow.source


def export_workflows(store: WorkflowStore, client: str | None, directory: Path) -> list[Path]:
    """Write every version of ``client``'s workflows into ``directory`` as
    ``NAME.vVERSION.py`` (created if missing); return the files written."""
    make_dirs(directory)
    written = []
    for workflow in store.all_versions(client):
        path = directory / f"{validate_name(workflow.name)}.v{workflow.version}.py"
        # A new file renamed over the name: a symlink or FIFO already there (a folder someone
        # else prepared) is replaced, never followed nor opened.
        write_private(path, render_file(workflow).encode("utf-8", "surrogatepass"))
        written.append(path)
    return written


@dataclass
class ImportOutcome:
    """What an import did: one line per file, and how many files were refused."""

    lines: list[str] = field(default_factory=list)
    refused: int = 0


def _parse(text: str) -> tuple[str, str, str]:
    """``(name, description, source)`` of a file's text; :class:`WorkflowError` naming why not."""
    lines = text.split("\n")
    if not lines or lines[0].rstrip("\r") != HEADER:
        raise WorkflowError(f"its first line is not {HEADER!r}")
    fields: dict[str, object] = {}
    for index, raw in enumerate(lines[1 : _MAX_HEADER_LINES + 1], start=1):
        line = raw.rstrip("\r")
        if line == _END:
            source = "\n".join(lines[index + 1 :])
            break
        key, sep, value = line.removeprefix("# ").partition(": ")
        if not line.startswith("# ") or not sep or not key.isidentifier():
            raise WorkflowError(f"header line {index + 1} is not '# key: value'")
        if key in fields:  # a reviewer reads the first; the file must not mean the second
            raise WorkflowError(f"header line {index + 1} repeats the key {key}")
        try:
            fields[key] = json.loads(value)
        except ValueError:
            raise WorkflowError(
                f"header line {index + 1}: the value of {key} is not JSON"
            ) from None
    else:
        raise WorkflowError(f"no line holding {_END!r} alone ends the header")
    name = validate_name(fields.get("name"))
    description = fields.get("description", "")
    if not isinstance(description, str):
        raise WorkflowError("the description in the header is not a string")
    return name, description, source


def _read_regular(path: Path, most: int) -> bytes:
    """At most ``most`` bytes of ``path`` if it is a regular file (not a symlink), decided on the
    file opened (a name swapped for a FIFO or a device after a check could block or never end)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise WorkflowError("a symbolic link, not a regular file") from None
        raise
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise WorkflowError("not a regular file")
        return handle.read(most)


def import_workflows(store: WorkflowStore, client: str | None, directory: Path) -> ImportOutcome:
    """Save every ``*.py`` workflow file of ``directory`` for ``client`` (in name and version
    order); a bad file is refused with its reason, the others still imported."""
    outcome = ImportOutcome()
    limit = store.limits.max_source_bytes + _MAX_HEADER_BYTES
    parsed: list[tuple[str, int, Path, str, str, str]] = []
    for path in sorted(directory.glob("*.py")):
        try:
            data = _read_regular(path, limit + 1)
            if len(data) > limit:
                raise WorkflowError(f"larger than {limit} bytes")
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                raise WorkflowError("not UTF-8 text") from None
            name, description, source = _parse(text)
            version = _header_version(text)
        except (OSError, WorkflowError) as exc:
            outcome.refused += 1
            outcome.lines.append(f"{path.name}: refused: {_message(exc)}")
            continue
        parsed.append((name, version, path, name, description, source))
    for _, _, path, name, description, source in sorted(parsed, key=lambda p: (p[0], p[1])):
        try:
            saved = store.save(client, name, source, description, session="import", skip_same=True)
        except (OSError, WorkflowError) as exc:
            outcome.refused += 1
            outcome.lines.append(f"{path.name}: refused: {_message(exc)}")
            continue
        verb = "imported as" if saved.created else "already saved as"
        outcome.lines.append(f"{path.name}: {verb} {saved.name} version {saved.version}")
    return outcome


def _header_version(text: str) -> int:
    for line in text.split("\n")[1:_MAX_HEADER_LINES]:
        if line.startswith("# version: "):
            try:
                value = json.loads(line.removeprefix("# version: "))
            except ValueError:
                return 0
            return value if isinstance(value, int) and not isinstance(value, bool) else 0
    return 0


def _message(exc: Exception) -> str:
    text = exc.message if isinstance(exc, WorkflowError) else str(exc)
    # One line per file whatever the reason holds (a name quoted from a hostile header).
    return text.replace("\n", " ").encode("ascii", "backslashreplace").decode()[:300]
