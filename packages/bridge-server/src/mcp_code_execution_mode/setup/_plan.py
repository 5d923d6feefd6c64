"""What ``setup`` would change, computed without writing anything.

The client keeps one entry: the bridge, started by this interpreter by absolute path. Every other
server of its user-wide file moves, as the client wrote it (``${VAR}`` references included), into
the bridge's servers file, which the bridge reads and the client does not: the client then pays for
one tool's schema instead of every server's (with ``--tools direct`` or ``both`` the bridge lists
each proxied tool itself, under its policy, approvals and audit).
"""

from __future__ import annotations

import json
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bridge_core.discovery import (
    SELF_MARKERS,
    SourceUnreadable,
    Where,
    display_path,
    prompted_inputs,
    same_server,
)

from mcp_code_execution_mode._direct import MODES
from mcp_code_execution_mode.setup._clients import Client
from mcp_code_execution_mode.setup._documents import (
    ConfigDocument,
    DocumentError,
    JsonDocument,
    TomlDocument,
)
from mcp_code_execution_mode.setup._files import (
    canonical_digest,
    link_folders,
    open_to_others,
    read_bytes,
    real_path,
)

__all__ = ["BRIDGE_ENTRY_NAME", "FileEdit", "Plan", "Request", "SetupError", "make_plan", "shown"]

BRIDGE_ENTRY_NAME = "code-execution"
"""The name of the bridge's entry when the client has none yet."""
BRIDGE_ARGS = ["-m", "mcp_code_execution_mode"]


class SetupError(Exception):
    """``setup`` cannot go on; the message names the problem and the fix."""


@dataclass(frozen=True, slots=True)
class Request:
    """What the user asked for."""

    client: Client
    where: Where
    command: str
    """The interpreter the client must start (absolute)."""
    env: Mapping[str, str]
    """The bridge entry's ``env``: the settings given to ``setup`` as flags."""
    servers_file: Path
    keep: tuple[str, ...] = ()
    tools: str | None = None
    """``--tools``: the entry starts ``serve --tools MODE``. None: an existing entry's mode is
    kept, a new entry has none (the settings file's ``[tools] mode`` decides, code by default)."""


@dataclass(slots=True)
class FileEdit:
    """One file's change."""

    path: Path
    """The file written (a symlink's target)."""
    shown: str
    before: bytes | None
    """None: the file does not exist yet."""
    after: bytes
    before_table: dict[str, Any]
    after_table: dict[str, Any]
    lost_comments: bool = False
    open_mode: int | None = None
    """The file's mode when other accounts can reach it (it is written 0600: say so)."""


@dataclass(slots=True)
class Plan:
    """Everything ``setup`` would do."""

    request: Request
    bridge_name: str
    bridge_args: list[str] = field(default_factory=lambda: list(BRIDGE_ARGS))
    """The ``args`` of the bridge's entry after setup."""
    moved: dict[str, Any] = field(default_factory=dict)
    kept: list[str] = field(default_factory=list)
    prompted: dict[str, list[str]] = field(default_factory=dict)
    """Servers left in the client because they use ``${input:ID}`` (VS Code prompts the user for
    it when it starts the server; the bridge cannot): name → the references."""
    client_edit: FileEdit | None = None
    servers_edit: FileEdit | None = None
    left_in_place: list[tuple[str, list[str]]] = field(default_factory=list)
    """Project files of this client (path shown, server names): never edited."""
    servers_key: str = "mcpServers"

    @property
    def edits(self) -> list[FileEdit]:
        return [e for e in (self.client_edit, self.servers_edit) if e is not None]


def shown(path: Path, where: Where) -> str:
    """``~/...`` for paths in the home directory."""
    return display_path(path, where.home)


def _launches_bridge(value: object) -> bool:
    if not isinstance(value, dict):
        return False
    parts = [value.get("command")]
    args = value.get("args")
    if isinstance(args, list):
        parts += args
    launched = " ".join(p for p in parts if isinstance(p, str))
    return any(marker in launched for marker in SELF_MARKERS)


def _document(text: str, key: str, toml: bool) -> ConfigDocument:
    return TomlDocument(text, key) if toml else JsonDocument(text, key)


def servers_document(path: Path, text: str) -> ConfigDocument:
    """The bridge's servers file: ``mcpServers`` JSON, or whichever shape a given file has."""
    if path.suffix == ".toml":
        return TomlDocument(text, "mcp_servers")
    key = "mcpServers"
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError:
        data = {}
    if isinstance(data, dict) and key not in data:
        key = next((k for k in ("servers", "mcp_servers") if k in data), key)
    return JsonDocument(text, key)


def _decode(data: bytes | None, where: str) -> str:
    if data is None:
        return ""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise SetupError(f"{where} is not UTF-8 text; fix it, then run setup again") from None


def _tools_of(existing: object) -> str | None:
    """The mode an existing bridge entry passes to ``--tools`` (``--tools M`` or ``--tools=M``)."""
    args = existing.get("args") if isinstance(existing, Mapping) else None
    if not isinstance(args, list):
        return None
    for i, arg in enumerate(args):
        if arg == "--tools" and i + 1 < len(args):
            value = args[i + 1]
        elif isinstance(arg, str) and arg.startswith("--tools="):
            value = arg.removeprefix("--tools=")
        else:
            continue
        return value if value in MODES else None
    return None


def _bridge_args(request: Request, existing: object) -> list[str]:
    """The bridge entry's ``args``: ``serve --tools MODE`` added for a mode asked for, or kept
    from the entry being updated, so running ``setup`` again never switches the mode back."""
    mode = request.tools or _tools_of(existing)
    return [*BRIDGE_ARGS, "serve", "--tools", mode] if mode else list(BRIDGE_ARGS)


def _bridge_entry(plan: Plan, existing: Mapping[str, Any] | None) -> dict[str, Any]:
    request = plan.request
    entry: dict[str, Any] = dict(existing or {})
    if request.client.typed:
        entry.setdefault("type", "stdio")
    entry["command"] = request.command
    entry["args"] = list(plan.bridge_args)
    env = dict(entry.get("env") or {})
    env.update(request.env)
    if env:
        entry["env"] = env
    else:
        entry.pop("env", None)
    return entry


def _edit(
    path: Path, label: str, before: bytes | None, doc: ConfigDocument, old: dict[str, Any]
) -> FileEdit | None:
    new = doc.servers()
    if before is not None and canonical_digest(new) == canonical_digest(old):
        return None  # nothing changes: never rewrite a file only to reformat it
    _check_folder(path.parent, label)
    after = doc.dumps().encode()
    return FileEdit(path, label, before, after, old, new, doc.lost_comments, open_to_others(path))


def _check_folder(folder: Path, label: str) -> None:
    """Refuse a folder other accounts may write to: they could replace the file, credentials
    and all, after setup wrote it private (a sticky folder like /tmp keeps them from it)."""
    while not folder.is_dir() and folder.parent != folder:
        folder = folder.parent  # a missing folder is created 0700: its existing parent decides
    info = folder.stat()
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not info.st_mode & stat.S_ISVTX:
        raise SetupError(
            f"{label}: its folder {folder} can be written by other accounts "
            f"(mode {stat.S_IMODE(info.st_mode):o}), who could replace the file and read the "
            "credentials it receives; make the folder private (chmod go-w) or choose another "
            "file (--config)"
        )


def make_plan(request: Request) -> Plan:
    """Compute the change; raises :class:`SetupError` when it cannot be made safely."""
    client, where = request.client, request.where
    source = client.user_source(where)
    label = shown(source.path, where)
    path = real_path(source.path)
    for folder in link_folders(source.path):
        _check_folder(folder, label)
    if not path.parent.is_dir():
        raise SetupError(
            f"{label} does not exist, nor does its folder: is {client.name} installed? "
            f"(create {shown(path.parent, where)} to set it up anyway)"
        )
    before = read_bytes(path)
    try:
        doc = _document(_decode(before, label), client.table, client.toml)
        # The values moved are the ones the bridge's reader sees: client dialects (Gemini's
        # httpUrl, Codex's env_vars, Windsurf's serverUrl) mapped to the common shape.
        normalised = {} if before is None else {e.name: e.value for e in source.read(path)}
    except (DocumentError, SourceUnreadable) as exc:
        raise SetupError(f"{label}: {exc}; fix the file, then run setup again") from None
    table = doc.servers()
    unknown = [name for name in request.keep if name not in table]
    if unknown:
        raise SetupError(
            f"--keep {' '.join(unknown)}: no such server in {label} "
            f"(its servers: {', '.join(table) or 'none'})"
        )
    bridges = [name for name, value in table.items() if _launches_bridge(value)]
    bridge_name = bridges[0] if bridges else BRIDGE_ENTRY_NAME
    plan = Plan(request, bridge_name, _bridge_args(request, table.get(bridge_name)))
    for name, value in table.items():
        if name in bridges:
            continue
        asked = prompted_inputs(value)
        if asked:
            plan.prompted[name] = asked
        elif name in request.keep:
            plan.kept.append(name)
        else:
            plan.moved[name] = normalised.get(name, value)
    if bridge_name in plan.kept:
        raise SetupError(f"--keep {bridge_name}: that name is the bridge's entry; rename it first")

    servers_label = shown(request.servers_file, where)
    servers_path = real_path(request.servers_file)
    for folder in link_folders(request.servers_file):
        _check_folder(folder, servers_label)
    servers_before = read_bytes(servers_path)
    try:
        servers_doc = servers_document(servers_path, _decode(servers_before, servers_label))
    except DocumentError as exc:
        raise SetupError(f"{servers_label}: {exc}; fix the file, then run setup again") from None
    present = servers_doc.servers()
    plan.servers_key = servers_doc.key
    clashes = [
        name
        for name, value in plan.moved.items()
        if name in present and not same_server(name, present[name], value)
    ]
    if clashes:
        raise SetupError(
            f"{', '.join(map(repr, clashes))} already in {servers_label} with other settings: "
            f"rename or remove one of each pair, or keep them in {client.name} with "
            f"--keep {' '.join(clashes)}"
        )

    old_table = doc.servers()
    for name in plan.moved:
        doc.remove_server(name)
    doc.put_server(bridge_name, _bridge_entry(plan, table.get(bridge_name)))
    plan.client_edit = _edit(path, label, before, doc, old_table)
    old_servers = servers_doc.servers()
    if servers_before is None:
        # A new file gets its servers table even when nothing moves: the bridge's reader rejects
        # a bare `{}` (no servers table, not a server object), and doctor fails on it.
        servers_doc.replace_table({})
    for name, value in plan.moved.items():
        if name not in present:
            servers_doc.put_server(name, value)
    if plan.moved or servers_before is None:
        plan.servers_edit = _edit(
            servers_path, servers_label, servers_before, servers_doc, old_servers
        )
    for project in client.project_sources(where):
        try:
            names = [e.name for e in project.read(project.path)] if project.path.is_file() else []
        except (SourceUnreadable, OSError):
            continue
        if names:
            plan.left_in_place.append((shown(project.path, where), names))
    return plan


def entry_env(
    flags: Mapping[str, str], servers_file: Path, default_file: Path, environ: Mapping[str, str]
) -> dict[str, str]:
    """The bridge entry's ``env``: the settings given as flags, plus ``MCP_BRIDGE_CONFIG`` when
    the bridge might not find the servers file by itself (clients start servers with a bare
    environment, without the shell's ``XDG_CONFIG_HOME``)."""
    env = dict(flags)
    discover_off = env.get("MCP_BRIDGE_DISCOVER", "").strip().lower() in ("false", "0", "no", "off")
    if servers_file != default_file or discover_off or environ.get("XDG_CONFIG_HOME"):
        env["MCP_BRIDGE_CONFIG"] = str(servers_file)
    return env
