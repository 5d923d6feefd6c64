"""``mcp-code-execution-mode setup CLIENT``: make the token saving real for one MCP client.

It adds the bridge to the client's user-wide config file (started by this interpreter, by
absolute path) and moves the client's other servers into the bridge's servers file, so the client
loads one tool instead of every server's schemas. It shows the change first (``--dry-run`` shows
only, for every verb: :func:`run_setup` is the one place that decides whether anything is written),
keeps a backup beside each file it edits, and ``--undo`` puts everything back.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

from bridge_core.discovery import Where, bridge_servers_file
from bridge_core.sessions import visible

from mcp_code_execution_mode.setup._clients import CLIENTS, Client
from mcp_code_execution_mode.setup._files import Disk, DryRun
from mcp_code_execution_mode.setup._plan import Request, SetupError, entry_env, make_plan, shown
from mcp_code_execution_mode.setup._record import apply_plan, undo
from mcp_code_execution_mode.setup._show import describe

__all__ = ["CLIENTS", "Client", "SetupError", "run_setup"]


def run_setup(
    client_key: str,
    *,
    where: Where,
    state_dir: Path,
    flags: Mapping[str, str],
    servers_file: Path | None = None,
    keep: Sequence[str] = (),
    dry_run: bool = False,
    undo_last: bool = False,
    force: bool = False,
    tools: str | None = None,
    out: TextIO | None = None,
) -> int:
    """Run the command; returns the exit status (0 done, 1 refused with the reason printed).

    ``flags``: the settings given on the command line, as ``MCP_BRIDGE_*`` variables; they go
    into the bridge entry's ``env``. ``servers_file``: ``--config``, else the bridge's own file.
    ``tools``: ``--tools``, the mode the entry starts the bridge in (``serve --tools MODE``);
    None keeps an existing entry's.
    """
    out = out or sys.stdout
    client = CLIENTS[client_key]
    # The one place that decides whether anything is written: every write below goes through
    # this disk, and a dry run's disk writes nothing.
    disk = DryRun() if dry_run else Disk()
    try:
        if undo_last:
            done = undo(client, state_dir, force=force, disk=disk)
            print(f"undo the last setup of {client.name}:", file=out)
            for line in done.lines:
                print(("  would " if disk.dry_run else "  ") + line, file=out)
            if disk.dry_run:
                print("dry run: nothing was written", file=out)
            else:
                print(f"undone; restart {client.name} to load its servers again", file=out)
            return 0
        default_file = bridge_servers_file(where)
        target = (servers_file or default_file).absolute()
        request = Request(
            client=client,
            where=where,
            # Not resolved: a virtualenv's python is a symlink whose target is not the venv.
            command=os.path.abspath(sys.executable),
            env=entry_env(flags, target, default_file, where.environ),
            servers_file=target,
            keep=tuple(keep),
            tools=tools,
        )
        plan = make_plan(request)
        for line in describe(plan):
            print(line, file=out)
        if not plan.edits:
            return 0
        backups = apply_plan(plan, state_dir, disk)
    except (SetupError, OSError) as exc:
        # Names in the message come from the user's files: shown, never interpreted.
        print(visible(f"setup {client_key}: {exc}", single_line=True), file=out)
        return 1
    if disk.dry_run:
        print("dry run: nothing was written", file=out)
        return 0
    for backup in backups:
        print(f"backup: {shown(backup, where)}", file=out)
    print(
        f"done; restart {client.name} to load the change "
        f"(undo: mcp-code-execution-mode setup {client.key} --undo)",
        file=out,
    )
    return 0
