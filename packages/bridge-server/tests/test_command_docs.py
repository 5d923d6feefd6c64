"""What the pages tell a reader to type exists: every command of the CLI is in the
troubleshooting page's answer to a typo, every command line of the Claude Code page parses, and
every command line of every page (README.md and docs/, in shell and text blocks, indented blocks
and inline) names a command and flags that exist, parsed by the CLI's own argument parsers
(``mcp-code-execution-mode``, ``python -m mcp_code_execution_mode``, ``bridge-image``)."""

from __future__ import annotations

import contextlib
import functools
import io
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
from bridge_image.cli import _parser as image_parser
from mcp_code_execution_mode.cli import COMMANDS, UsageError, build_parser, main

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


# --- every command line of every page ------------------------------------------------------------

REPO = DOCS.parent
PAGES = (REPO / "README.md", *sorted(DOCS.rglob("*.md")))
_SHELL_LANGUAGES = frozenset({"bash", "console", "text", "sh", "shell", ""})
_INDENTED = re.compile(r"(?:^\n)((?:(?: {4}|\t).*\n?)+)", re.M)
_INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
# A program name stands alone: not a folder or file named after it (~/.config/mcp-code-...).
_PROGRAM = re.compile(
    r"(?<![\w/.~-])(?P<program>mcp-code-execution-mode|bridge-image)(?![\w/.:-])"
    r"|(?P<python>\S*python[\d.]*\s+-m\s+mcp_code_execution_mode)(?![\w/.:-])"
)
# The words after it, up to the end of the shell command (a pipe, redirect, comment, `)`, quote).
_WORDS = re.compile(r"((?:(?:[ \t]|\\\n)+[^\s#`)|;&<>\"'\\]+)*)")  # `\` continues a line
_COMMAND_WORDS = re.compile(rf"^(?:{'|'.join(map(re.escape, COMMANDS))})(?: |$)")
_PLACEHOLDER = re.compile(r"^(?:[A-Z][A-Z_:]*|\{\w+\}|…|X)$")
_HELP = frozenset({"--help", "-h", "--version"})


@dataclass(frozen=True)
class Shown:
    """A command line a page shows: where, and the words after the program name."""

    where: str
    program: str  # "cli" (mcp-code-execution-mode, python -m ...) or "bridge-image"
    words: tuple[str, ...]
    complete: bool  # a line of a code block (to be typed as is), not a mention in the prose


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _commands_in(text: str, offset: int, page: str, complete: bool) -> list[Shown]:
    found = []
    for match in _PROGRAM.finditer(text):
        if "#" in text[text.rfind("\n", 0, match.start()) + 1 : match.start()]:
            continue  # a comment (a file's header shown by `cat`), not a line to type
        words = _WORDS.match(text, match.end())
        assert words is not None  # the pattern matches the empty string
        program = "bridge-image" if match.group("program") == "bridge-image" else "cli"
        where = f"{page}:{_line_of(text, match.start()) + offset}"
        line = words.group(1).replace("\\\n", " ")
        found.append(Shown(where, program, tuple(shlex.split(line)), complete))
    return found


def _fences(text: str) -> tuple[list[tuple[int, str]], str]:
    """The shell and text blocks of ``text`` (first line, body), and ``text`` with every fenced
    block blanked out (the prose, line numbers kept)."""
    blocks, prose, lines = [], [], text.splitlines(keepends=True)
    fence: tuple[int, str, list[str]] | None = None
    for number, line in enumerate(lines, start=1):
        if fence is None and line.lstrip().startswith("```"):
            fence = (number + 1, line.strip().removeprefix("```").strip(), [])
        elif fence is not None and line.strip() == "```":
            if fence[1] in _SHELL_LANGUAGES:
                blocks.append((fence[0], "".join(fence[2])))
            fence = None
        elif fence is not None:
            fence[2].append(line)
        else:
            prose.append(line)
            continue
        prose.append("\n")
    return blocks, "".join(prose)


def _shown(page: Path) -> list[Shown]:
    """Every command line of ``page``: in its shell/text blocks, indented blocks and inline."""
    name = page.relative_to(REPO).as_posix()
    blocks, prose = _fences(page.read_text(encoding="utf-8"))
    blocks += [(_line_of(prose, m.start(1)), m.group(1)) for m in _INDENTED.finditer(prose)]
    found: list[Shown] = []
    for first, body in blocks:
        found += _commands_in(body, first - 1, name, complete=True)
    for span in _INLINE.finditer(prose):
        code = span.group(1).strip()
        line = _line_of(prose, span.start())
        if _PROGRAM.search(code):
            found += _commands_in(code, line - 1, name, complete=False)
        elif _COMMAND_WORDS.match(code):  # `setup CLIENT --undo`: the program name left out
            found.append(Shown(f"{name}:{line}", "cli", tuple(shlex.split(code)), False))
    return found


def _filled(words: tuple[str, ...], complete: bool) -> list[str]:
    """``words`` with placeholders (``CLIENT``, ``NAME``, ``{image}``) given a real value, and
    for a mention in the prose (``setup --undo``) the positional argument it leaves out."""
    filled: list[str] = []
    for word in words:
        if word in _HELP:
            continue
        word = word.removeprefix("[").removesuffix("]")  # `tag [--slim]`: an optional flag
        if _PLACEHOLDER.match(word):
            before = filled[-1] if filled else ""
            word = {"setup": "claude-desktop", "--tools": "direct"}.get(before, "x")
        filled.append(word)
    positional_left_out = len(filled) == 1 or (len(filled) > 1 and filled[1].startswith("-"))
    if not complete and filled and filled[0] in ("setup", "token") and positional_left_out:
        filled.insert(1, "claude-desktop" if filled[0] == "setup" else "x")
    return filled


def _parse(image: bool, argv: list[str]) -> str:
    """argparse's complaint about ``argv`` ("" when it parses)."""
    if not image:
        try:
            build_parser().parse_args(argv)
        except UsageError as exc:
            return str(exc)
        return ""
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said), contextlib.redirect_stdout(said):
            image_parser("bridge-image").parse_args(argv)
    except SystemExit as stop:  # bridge-image's parser exits on a bad command line
        return said.getvalue().strip().splitlines()[-1] if stop.code else ""
    return ""


@functools.cache
def _help(image: bool, command: str) -> str:
    """The ``--help`` of ``command``: every flag it takes, spelt out."""
    said = io.StringIO()
    with contextlib.redirect_stdout(said), contextlib.suppress(SystemExit):
        (image_parser("bridge-image") if image else build_parser()).parse_args([command, "-h"])
    return said.getvalue()


def _problem(shown: Shown) -> str | None:
    """Why the command line does not parse, or None."""
    words = _filled(shown.words, shown.complete)
    if shown.program == "cli" and (not words or words[0].startswith("-")):
        words = ["serve", *words]  # what `main` runs for a bare command (client configs)
    if not shown.complete and len(words) == 1 and words[0] in COMMANDS:
        return None  # a command named in the prose (`workflows`), not a line to type
    image = shown.program == "bridge-image" or words[0] == "image"
    argv = words[1:] if image and shown.program == "cli" else words
    if image and not argv:
        return None if not shown.complete else "`image` needs a command"
    message = _parse(image, argv)
    if message and (
        shown.complete
        or not (
            "the following arguments are required: --" in message
            or message.endswith(f"argument {argv[-1]}: expected one argument")
        )
    ):  # a mention in the prose may leave out a required flag, or a flag's value
        return message
    # argparse takes a prefix of a flag (--offlin); a page shows the whole flag.
    for flag in (word.split("=", 1)[0] for word in argv if word.startswith("--")):
        if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", _help(image, argv[0])):
            return f"{flag} is not a flag of {argv[0]} (only a prefix of one)"
    return None


def test_every_command_line_of_every_page_exists_with_the_flags_shown() -> None:
    shown = [command for page in PAGES for command in _shown(page)]
    # The pages that tell a reader what to type are all read (a broken pattern finds nothing).
    pages = {command.where.split(":")[0] for command in shown}
    assert {"README.md", "docs/getting-started.md", "docs/images.md", "docs/team.md"} <= pages
    assert len(shown) > 150
    problems = [f"{c.where}: {' '.join(c.words)!r}: {p}" for c in shown if (p := _problem(c))]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("words", "complete"),
    [
        (("setup", "claude-desktop", "--dry-runn"), True),
        (("setup", "--undoo"), False),
        (("serve", "--tools", "all"), False),
        (("image", "build", "--offlin"), True),
        (("imag",), False),
    ],
)
def test_a_flag_or_command_that_does_not_exist_is_a_problem(
    words: tuple[str, ...], complete: bool
) -> None:
    assert _problem(Shown("page.md:1", "cli", words, complete)) is not None
