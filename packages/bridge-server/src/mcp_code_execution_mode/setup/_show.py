"""How ``setup`` shows a change before making it: a summary, then a diff of each servers table.

Every line passes the bridge's own redaction (:mod:`bridge_core.redaction`), with the secrets of
every entry shown: a token in ``args`` (``--api-key sk-...``), in a URL (``?key=...``, user
info) or in any other field is masked as the logs and the sandbox's replies mask it. ``env`` and
``headers`` values are not shown at all, secrets or not: reviewing a move needs only their names.
Control, bidi and line-separator characters (in a server's name, say) are shown as escapes.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Iterator
from typing import Any

from bridge_core.redaction import MASK, Redactor, entry_secrets
from bridge_core.sessions import visible

from mcp_code_execution_mode.setup._plan import FileEdit, Plan, shown

__all__ = ["describe", "redactor_for"]

_HIDDEN = ("env", "headers", "http_headers")


def redactor_for(tables: Iterable[dict[str, Any]]) -> Redactor:
    """The redactor of every secret in these servers tables' entries."""
    found: set[str] = set()
    for table in tables:
        for entry in table.values():
            if isinstance(entry, dict):
                found |= entry_secrets(entry)
    return Redactor(found)


def _hidden(table: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, entry in table.items():
        if isinstance(entry, dict):
            entry = dict(entry)
            for key in _HIDDEN:
                if isinstance(entry.get(key), dict):
                    entry[key] = dict.fromkeys(entry[key], MASK)
        out[name] = entry
    return out


def _diff(edit: FileEdit, key: str, redactor: Redactor) -> Iterator[str]:
    def lines(table: dict[str, Any]) -> list[str]:
        # Masked as a value, before the dump: a secret holding a quote or a backslash is
        # escaped in JSON, so the dumped text would no longer contain it as configured.
        masked = redactor.value(_hidden(table))
        return json.dumps(masked, indent=2, ensure_ascii=False, default=str).splitlines()

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
    """The lines shown for ``plan`` (its diff included), every one masked."""
    tables = [plan.moved]
    for edit in plan.edits:
        tables += [edit.before_table, edit.after_table]
    redactor = redactor_for(tables)
    for line in _describe(plan, redactor):
        yield visible(redactor.text(line), single_line=True)


def _describe(plan: Plan, redactor: Redactor) -> Iterator[str]:
    request = plan.request
    client = request.client
    label = shown(client.user_source(request.where).path, request.where)
    yield f"setup {client.key}: {client.name} reads {label}"
    command = " ".join([request.command, *plan.bridge_args])
    yield f"  bridge entry {plan.bridge_name!r}: {command}"
    if "direct" in plan.bridge_args or "both" in plan.bridge_args:
        yield (
            "    it lists each proxied tool as server__tool (--tools): the client pays for "
            "their schemas on every request, as when it loaded the servers itself"
        )
    if request.env:
        yield f"    with env: {', '.join(sorted(request.env))}"
    servers = shown(request.servers_file, request.where)
    if plan.moved:
        yield f"  moves {len(plan.moved)} server(s) to {servers}: {', '.join(plan.moved)}"
    if plan.kept:
        yield f"  keeps in {client.name} (--keep): {', '.join(plan.kept)}"
    if plan.prompted:
        # The inputs by id: a header's `Bearer ${input:ID}` is masked as the credential it
        # stands for.
        asked = "; ".join(
            f"{name} (input {', '.join(ref[len('${input:') : -1] for ref in refs)})"
            for name, refs in plan.prompted.items()
        )
        yield (
            f"  keeps in {client.name}: {asked}: {client.name} asks the user for each "
            "${input:...} value when it starts the server; the bridge cannot ask and would "
            "send the text itself, so it does not proxy these"
        )
    for path, names in plan.left_in_place:
        yield (
            f"  left in place: {path} (project file, never edited): {', '.join(names)}; "
            f"{client.name} loads these itself in that project, and the bridge proxies them "
            "there too (doctor shows the cost)"
        )
    for edit in plan.edits:
        key = client.table if edit is plan.client_edit else plan.servers_key
        if edit.open_mode is not None:
            yield (
                f"  note: {edit.shown} can be read by other accounts (mode {edit.open_mode:o}); "
                "setup writes it 0600, since it holds credentials"
            )
        if edit.lost_comments:
            yield f"  note: the comments inside {edit.shown}'s servers table are not kept"
        yield from _diff(edit, key, redactor)
    if not plan.edits:
        yield "  nothing to change: already set up"
