"""What the pages tell a new user to type exists: every command of the CLI is in the
troubleshooting page's answer to a typo, and every command line of the Claude Code page parses."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from mcp_code_execution_mode.cli import COMMANDS, build_parser, main

DOCS = Path(__file__).resolve().parents[3] / "docs"


def test_the_troubleshooting_page_quotes_the_answer_to_a_typo_with_every_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["doctr"]) == 2
    said = capsys.readouterr().err.strip().split("; ", 1)[1]
    assert said == f"the commands are {', '.join(COMMANDS)} (mcp-code-execution-mode --help)"
    assert f"`unknown command {{name}}; {said}`" in (DOCS / "troubleshooting.md").read_text()


def _command_lines(page: Path) -> list[list[str]]:
    blocks = re.findall(r"```bash\n(.*?)```", page.read_text(encoding="utf-8"), re.S)
    lines = [line.split("#", 1)[0] for block in blocks for line in block.splitlines()]
    return [shlex.split(line) for line in lines if line.startswith("mcp-code-execution-mode ")]


def test_every_command_line_of_the_claude_code_page_parses() -> None:
    lines = _command_lines(DOCS / "claude-code.md")
    assert {"setup", "doctor"} <= {words[1] for words in lines}
    for words in lines:
        args = build_parser().parse_args(words[1:])  # raises UsageError for a flag that is not
        assert args.command in COMMANDS
        if args.command == "setup":
            assert args.client == "claude-code"
