"""How ``setup`` shows a change before making it: a summary, then a diff of each servers table
with every ``env`` and ``headers`` value masked (they are credentials)."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterator
from typing import Any

from mcp_code_execution_mode.setup._plan import BRIDGE_ARGS, FileEdit, Plan, shown

__all__ = ["describe"]

MASK = "***"


def _masked(table: dict[str, Any]) -> dict[str, Any]:
    shown: dict[str, Any] = {}
    for name, entry in table.items():
        if isinstance(entry, dict):
            entry = dict(entry)
            for key in ("env", "headers", "http_headers"):
                if isinstance(entry.get(key), dict):
                    entry[key] = dict.fromkeys(entry[key], MASK)
        shown[name] = entry
    return shown


def _diff(edit: FileEdit, key: str) -> Iterator[str]:
    def lines(table: dict[str, Any]) -> list[str]:
        return json.dumps(_masked(table), indent=2, ensure_ascii=False, default=str).splitlines()

    before = f"{edit.shown} ({key})" if edit.before is not None else "/dev/null"
    diff = difflib.unified_diff(
        lines(edit.before_table),
        lines(edit.after_table),
        before,
        f"{edit.shown} ({key}) after setup",
        lineterm="",
    )
    for line in diff:
        yield "    " + line


def describe(plan: Plan) -> Iterator[str]:
    """The lines shown for ``plan`` (its diff included)."""
    request = plan.request
    client = request.client
    label = shown(client.user_source(request.where).path, request.where)
    yield f"setup {client.key}: {client.name} reads {label}"
    command = " ".join([request.command, *BRIDGE_ARGS])
    yield f"  bridge entry {plan.bridge_name!r}: {command}"
    if request.env:
        yield f"    with env: {', '.join(sorted(request.env))}"
    servers = shown(request.servers_file, request.where)
    if plan.moved:
        yield f"  moves {len(plan.moved)} server(s) to {servers}: {', '.join(plan.moved)}"
    if plan.kept:
        yield f"  keeps in {client.name} (--keep): {', '.join(plan.kept)}"
    for path, names in plan.left_in_place:
        yield (
            f"  left in place: {path} (project file, never edited): {', '.join(names)}; "
            f"{client.name} loads these itself in that project, and the bridge proxies them "
            "there too (doctor shows the cost)"
        )
    for edit in plan.edits:
        key = client.table if edit is plan.client_edit else plan.servers_key
        if edit.lost_comments:
            yield f"  note: the comments inside {edit.shown}'s servers table are not kept"
        yield from _diff(edit, key)
    if not plan.edits:
        yield "  nothing to change: already set up"
