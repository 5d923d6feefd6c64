"""``workflows export`` / ``workflows import`` on the command line, and the principal a token
name stands for."""

from __future__ import annotations

from pathlib import Path

import pytest
from bridge_core.workflows import WorkflowStore
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp_code_execution_mode._clients import principal_client
from mcp_code_execution_mode._tokens import StaticTokenVerifier, add_token
from mcp_code_execution_mode._workflow_files import principal_key
from mcp_code_execution_mode.cli import main

SOURCE = "def tally(rows):\n    '''Count rows.'''\n    return len(rows)\n"


async def test_a_token_name_gives_the_key_serve_http_gives_that_tokens_requests(
    tmp_path: Path,
) -> None:
    tokens = tmp_path / "tokens"
    token = add_token(tokens, "alice")
    verified = await StaticTokenVerifier(tokens).verify_token(token)
    assert verified is not None
    assert principal_key("alice") == principal_client(AuthenticatedUser(verified))
    assert principal_key(None) is None
    with pytest.raises(ValueError, match="not a token name"):
        principal_key("../alice")


def test_export_then_import_for_a_token_principal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    store = WorkflowStore(state / "workflows")
    store.open()
    store.save(None, "tally", SOURCE, "Count the rows")
    store.close()
    out = tmp_path / "out"
    assert main(["workflows", "export", str(out), "--state-dir", str(state)]) == 0
    assert capsys.readouterr().out.splitlines() == [str(out / "tally.v1.py")]
    (out / "broken.py").write_text("print('not a workflow')\n")
    status = main(
        ["workflows", "import", str(out), "--principal", "alice", "--state-dir", str(state)]
    )
    assert status == 1
    assert capsys.readouterr().out.splitlines() == [
        "broken.py: refused: its first line is not '# mcp-code-execution-mode workflow'",
        "tally.v1.py: imported as tally version 1",
    ]
    store.open()
    (imported,) = store.latest(principal_key("alice"))
    assert (imported.source, imported.description) == (SOURCE, "Count the rows")
    store.close()


def test_a_bad_principal_name_is_a_usage_error(tmp_path: Path) -> None:
    status = main(
        ["workflows", "export", str(tmp_path), "--principal", "a b", "--state-dir", str(tmp_path)]
    )
    assert status == 2
