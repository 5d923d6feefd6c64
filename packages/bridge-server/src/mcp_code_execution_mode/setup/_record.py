"""Applying a plan with backups, and undoing it from its record.

Each applied ``setup`` leaves a record (``STATE_DIR/setup/CLIENT-STAMP.json``, 0600): the files it
wrote, their backups, digests of what it wrote and of each server it moved. ``--undo`` uses the
newest record of that client:

* a file nobody touched since gets its backup back byte for byte (or is deleted if setup
  created it);
* a file that changed since (clients rewrite ``~/.claude.json`` all the time) keeps those changes:
  only the servers table is put back, and only if it is still what setup wrote; a moved server is
  taken out of the servers file only if it is still what setup put there. Anything else is
  refused unless ``--force``; a file rewritten although it changed since setup (a hand edit,
  kept or thrown away by ``--force``) is backed up first, and that backup is kept.

Both go through the :class:`~mcp_code_execution_mode.setup._files.Disk` they are given: with a
:class:`~mcp_code_execution_mode.setup._files.DryRun` they write nothing.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_code_execution_mode.setup._clients import Client
from mcp_code_execution_mode.setup._documents import ConfigDocument, JsonDocument, TomlDocument
from mcp_code_execution_mode.setup._files import Disk, canonical_digest, digest, read_bytes
from mcp_code_execution_mode.setup._plan import Plan, SetupError, servers_document

__all__ = ["Undone", "apply_plan", "undo"]

RECORD_VERSION = 1


def _stamp() -> str:
    now = time.time_ns()
    seconds, fraction = divmod(now, 1_000_000_000)
    return time.strftime("%Y%m%d-%H%M%S", time.localtime(seconds)) + f"-{fraction:09d}"


def _records(state_dir: Path, client: Client) -> list[Path]:
    folder = state_dir / "setup"
    return sorted(folder.glob(f"{client.key}-*.json")) if folder.is_dir() else []


def apply_plan(plan: Plan, state_dir: Path, disk: Disk) -> list[Path]:
    """Back up, write every file of ``plan``, leave the record; returns the backups made.

    The servers file is written before the client's file: if anything fails in between, the
    servers are in both places (harmless), never in neither.
    """
    stamp = _stamp()
    edits = sorted(plan.edits, key=lambda e: e is plan.client_edit)
    for edit in edits:
        # The client may have rewritten its file since we read it: never overwrite that.
        if read_bytes(edit.path) != edit.before:
            raise SetupError(f"{edit.shown} changed while setup ran; run setup again")
    for edit in edits:
        disk.make_dir(edit.path.parent)
    folder = state_dir / "setup"
    disk.make_dir(folder)
    entries: list[dict[str, Any]] = []
    backups: list[Path] = []
    for edit in edits:
        backup = None
        if edit.before is not None:
            backup = disk.backup(edit.path, edit.before, stamp)
            backups.append(backup)
        role = "client" if edit is plan.client_edit else "servers"
        entry: dict[str, Any] = {
            "role": role,
            "path": str(edit.path),
            "shown": edit.shown,
            "backup": None if backup is None else str(backup),
            "written": digest(edit.after),
            "table": canonical_digest(edit.after_table),
        }
        if role == "servers":
            entry["moved"] = {n: canonical_digest(v) for n, v in plan.moved.items()}
        entries.append(entry)
    record = {"version": RECORD_VERSION, "client": plan.request.client.key, "files": entries}
    record_path = folder / f"{plan.request.client.key}-{stamp}.json"
    disk.write(record_path, json.dumps(record).encode())
    try:
        for edit in edits:
            disk.write(edit.path, edit.after)
    except BaseException:
        disk.remove(record_path)
        raise
    return backups


@dataclass(slots=True)
class Undone:
    """What ``--undo`` did (or would do), file by file, each line starting with a verb."""

    lines: list[str]
    record: Path


def _client_doc(client: Client, text: str) -> ConfigDocument:
    return TomlDocument(text, client.table) if client.toml else JsonDocument(text, client.table)


def _restore(disk: Disk, path: Path, backup: Path | None) -> None:
    if backup is None:
        disk.remove(path)
        return
    data = read_bytes(backup)
    if data is None:
        raise SetupError(f"the backup {backup} is gone: restore {path} by hand")
    disk.write(path, data)


def undo(client: Client, state_dir: Path, *, force: bool, disk: Disk) -> Undone:
    """Undo the newest ``setup`` of ``client``; raises :class:`SetupError` when it cannot."""
    records = _records(state_dir, client)
    if not records:
        raise SetupError(f"nothing to undo: no setup of {client.key} is recorded in {state_dir}")
    record_path = records[-1]
    record = json.loads(record_path.read_text())
    actions: list[tuple[Path, bytes | None, Path | None]] = []
    """(file, its new bytes or None to restore ``backup``, backup)."""
    forced: list[tuple[Path, str, bytes]] = []
    """Files rewritten although their servers changed since setup: backed up first."""
    lines: list[str] = []
    refusals: list[str] = []
    for entry in record["files"]:
        path = Path(entry["path"])
        backup = Path(entry["backup"]) if entry["backup"] else None
        current = read_bytes(path)
        if current is not None and digest(current) == entry["written"]:
            actions.append((path, None, backup))
            lines.append(
                f"restore {entry['shown']} from {backup}"
                if backup
                else f"remove {entry['shown']} (setup created it)"
            )
            continue
        if current is None:
            lines.append(f"skip {entry['shown']}: it is gone, nothing to restore")
            continue
        text = current.decode("utf-8-sig")
        if entry["role"] == "client":
            doc = _client_doc(client, text)
            if canonical_digest(doc.servers()) != entry["table"]:
                if not force:
                    refusals.append(f"{entry['shown']}: its {client.table} changed since setup")
                    continue
                forced.append((path, entry["shown"], current))
            original = None
            if backup is not None:
                old = _client_doc(client, (read_bytes(backup) or b"").decode("utf-8-sig"))
                original = old.item() if isinstance(old, TomlDocument) else old.servers()
            doc.replace_table(original)
            actions.append((path, doc.dumps().encode(), None))
            lines.append(f"put back the servers of {entry['shown']} (the rest of it is kept)")
        else:
            doc = servers_document(path, text)
            present = doc.servers()
            changed = [
                n
                for n, d in entry["moved"].items()
                if n in present and canonical_digest(present[n]) != d
            ]
            if changed:
                if not force:
                    refusals.append(f"{entry['shown']}: {', '.join(changed)} changed since setup")
                    continue
                forced.append((path, entry["shown"], current))
            for name in entry["moved"]:
                doc.remove_server(name)
            if backup is None and not doc.servers():
                actions.append((path, None, None))
                lines.append(f"remove {entry['shown']} (setup created it; it is empty now)")
            else:
                actions.append((path, doc.dumps().encode(), None))
                moved = ", ".join(entry["moved"]) or "nothing"
                lines.append(f"take {moved} out of {entry['shown']}")
    if refusals:
        raise SetupError(
            "not undone, because "
            + "; ".join(refusals)
            + ": check those changes, then run setup --undo --force to undo anyway"
        )
    stamp = _stamp()
    for path, label, current in forced:
        # --force throws those changes away: keep them where the user can find them.
        kept = disk.backup(path, current, f"undo-{stamp}")
        lines.append(f"back up {label} first, with the changes --force discards: {kept.name}")
    for path, data, backup in actions:
        if data is None:
            _restore(disk, path, backup)
        else:
            disk.write(path, data)
    for entry in record["files"]:
        if entry["backup"]:
            disk.remove(Path(entry["backup"]))
    disk.remove(record_path)
    return Undone(lines, record_path)
