"""``workflows export DIR`` and ``workflows import DIR``: a principal's workflows as ``.py``
files to review and commit, and back (:mod:`bridge_core.workflows._files` has the format).

The principal is the stdio client's by default; ``--principal NAME`` names an HTTP token's
principal by its name in the token file (the same key ``serve --http`` gives that token's
requests, so the files land where that user's sessions look).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from bridge_core.private_files import UnsafeDirectory
from bridge_core.workflows import WorkflowStore, export_workflows, import_workflows
from mcp.server.auth.provider import AccessToken, principal_components

from mcp_code_execution_mode._tokens import TOKEN_NAME_PATTERN
from mcp_code_execution_mode.settings import Settings

__all__ = ["principal_key", "run_workflows"]


def principal_key(name: str | None) -> str | None:
    """The client key ``serve --http`` gives the token named ``name`` (None: the stdio client)."""
    if name is None:
        return None
    if not re.fullmatch(TOKEN_NAME_PATTERN, name):
        raise ValueError(f"{name!r} is not a token name ({TOKEN_NAME_PATTERN})")
    # As the token verifier builds it (_tokens.StaticTokenVerifier.verify_token), then as
    # _clients.principal_client names it.
    token = AccessToken(token="", client_id=name, subject=name, scopes=[])
    return "principal:" + json.dumps(principal_components(token))


def run_workflows(settings: Settings, action: str, directory: str, principal: str | None) -> int:
    """Export or import; print one line per file; the exit status (1 if a file was refused)."""
    try:
        client = principal_key(principal)
        store = WorkflowStore(settings.resolved_state_dir / "workflows")
        store.open()
    except (ValueError, UnsafeDirectory, OSError) as exc:
        print(f"mcp-code-execution-mode: workflows {action}: {exc}", file=sys.stderr)
        return 2
    try:
        target = Path(directory)
        if action == "export":
            written = export_workflows(store, client, target)
            for path in written:
                print(path)
            print(f"{len(written)} workflow file(s) written to {target}", file=sys.stderr)
            return 0
        if not target.is_dir():
            print(f"mcp-code-execution-mode: workflows import: {target} is not a directory",
                  file=sys.stderr)  # fmt: skip
            return 2
        outcome = import_workflows(store, client, target)
        for line in outcome.lines:
            print(line)
        return 1 if outcome.refused else 0
    except OSError as exc:
        print(f"mcp-code-execution-mode: workflows {action}: {exc}", file=sys.stderr)
        return 2
    finally:
        store.close()
