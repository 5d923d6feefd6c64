"""The type check before running: a cell checked by ty, in a bounded child process.

The cell is untrusted text. It is written to ``cell.py`` in a private temporary directory and
checked there by ``ty`` (a static checker written in Rust: it parses, never imports or executes
anything of the cell), in a child process with a clean environment, a wall-clock timeout, and
limits on its address space and CPU time. The checker sees no third-party package: its Python is
an empty prefix, so ``pandas`` (in the sandbox, maybe not on the host) and the sandbox's own
``mcp`` module are unresolved, which ty types as ``Unknown`` — never a finding.

What is not a finding, by rule (a cell is not a module, and ty cannot know the session):

- a module that does not resolve (``import-not-found``);
- a name that is not defined (``unresolved-reference``, ``possibly-unresolved-reference``):
  names earlier cells of the session defined, and those the sandbox injects (``runtime``,
  ``mcp_servers``, ``mcp_<alias>``). Calls made through them are typed ``Unknown``: left to run
  time, never guessed;
- a syntax error (``invalid-syntax``): top-level ``await`` is one to a module checker and legal
  in a cell; a real syntax error is the sandbox's to report, as it always was.

Everything else ty reports as an error is a finding. Warnings of ty are not. A checker that times
out, crashes or is killed by a limit gives no findings and says why (:attr:`TypeCheck.incomplete`):
the cell is never blocked because its check could not finish.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bridge_core._visible import visible
from bridge_core.catalog._check import MAX_CHECKED_CHARS, Finding

try:
    import resource
except ImportError:  # pragma: no cover - Windows: the timeout alone bounds the checker
    resource = None  # type: ignore[assignment]

__all__ = [
    "TYPE_CHECK_CPU_SECONDS",
    "TYPE_CHECK_MEMORY_BYTES",
    "TYPE_CHECK_TIMEOUT",
    "TypeCheck",
    "checker_missing_advice",
    "find_type_checker",
    "type_check",
]

TYPE_CHECK_TIMEOUT = 5.0
"""Seconds of wall clock for one check: ty takes ~50 ms on a 20-line cell (docs/decisions/0103),
a loaded host may take ten times that; past this the cell runs unchecked, with a warning."""
TYPE_CHECK_MEMORY_BYTES = 1024 * 1024 * 1024
"""Address space of the checker (RLIMIT_AS): it peaks near 40 MiB on a cell and runs within
128 MiB; a cell crafted to make it grow is stopped here instead of taking the host's memory."""
TYPE_CHECK_CPU_SECONDS = 10
"""CPU seconds (RLIMIT_CPU), over its threads: a second bound should the wall clock not fire."""
SANDBOX_PYTHON = "3.13"
"""The Python of the sandbox image (images/sandbox): the language and stdlib the cell runs on."""
_THREADS = "2"
"""Threads of the checker: one file needs no more, and each thread reserves address space."""
_MAX_MESSAGE_CHARS = 240
"""A finding's message may quote the cell (a string literal's type): it is cut, then escaped."""

_NOT_FINDINGS = frozenset(
    {
        "import-not-found",
        "unresolved-import",  # its name before ty 1.0
        "unresolved-reference",
        "possibly-unresolved-reference",
        "invalid-syntax",
    }
)
_ERROR_SEVERITIES = frozenset({"major", "critical", "blocker"})
"""ty's errors in its GitLab report (warnings are ``minor``, notes ``info``)."""


@dataclass(frozen=True, slots=True)
class TypeCheck:
    """What the type check found: findings, and why it did not finish (None: it did)."""

    findings: tuple[Finding, ...] = ()
    incomplete: str | None = None


def find_type_checker() -> str | None:
    """The ``ty`` executable: the one installed with this Python (the ``ty`` package), else
    one on PATH, else None."""
    try:
        from ty import find_ty_bin  # type: ignore[import-not-found,unused-ignore]

        return str(find_ty_bin())
    except (ImportError, FileNotFoundError):
        return shutil.which("ty")


def _bounds() -> None:  # pragma: no cover - runs in the child, between fork and exec
    # Only setrlimit between fork and exec: no lock taken, nothing imported (the module is).
    if resource is not None:
        resource.setrlimit(resource.RLIMIT_AS, (TYPE_CHECK_MEMORY_BYTES, TYPE_CHECK_MEMORY_BYTES))
        resource.setrlimit(resource.RLIMIT_CPU, (TYPE_CHECK_CPU_SECONDS, TYPE_CHECK_CPU_SECONDS))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def type_check(code: str, checker: str, *, timeout: float = TYPE_CHECK_TIMEOUT) -> TypeCheck:
    """The type errors of ``code`` found by ``checker`` (the ty executable), in line order.

    Blocking: call it from a worker thread. ``code`` is never imported or executed.
    """
    if len(code) > MAX_CHECKED_CHARS:
        return TypeCheck(incomplete=f"the cell is over {MAX_CHECKED_CHARS // 1024} KiB")
    try:
        # Top-level await allowed, as the sandbox compiles; only a tree comes back. A cell that
        # does not parse is not type-checked: the sandbox reports its syntax error.
        compile(code, "<cell>", "exec", ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        return TypeCheck()
    # The check's files are host I/O like its start: a temporary directory gone, or a full
    # disk, is a check that could not run, never a failure of the call (in mode nested the
    # cell has run already: its own result must not be lost to an advisory check).
    try:
        with tempfile.TemporaryDirectory(prefix="bridge-check-", ignore_cleanup_errors=True) as tmp:
            work = Path(tmp)  # 0700 (mkdtemp): the cell is readable by the bridge's user only
            prefix = work / "prefix"
            (prefix / "lib" / f"python{SANDBOX_PYTHON}" / "site-packages").mkdir(parents=True)
            (work / "cell.py").write_text(code, "utf-8")
            # A ty.toml of our own: ty looks for project settings upwards from the cell.
            (work / "ty.toml").write_text("", "utf-8")
            command = [
                checker, "check", "cell.py", "--python", str(prefix),
                "--python-version", SANDBOX_PYTHON, "--python-platform", "linux",
                "--output-format", "gitlab", "--no-progress", "--color", "never", "--exit-zero",
            ]  # fmt: skip
            env = {"PATH": "", "HOME": tmp, "XDG_CONFIG_HOME": tmp, "TY_MAX_PARALLELISM": _THREADS}
            preexec: Callable[[], None] | None = _bounds if sys.platform != "win32" else None
            try:
                done = subprocess.run(
                    command,
                    cwd=work,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    timeout=timeout,
                    preexec_fn=preexec,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                return TypeCheck(incomplete=f"the type check did not finish within {timeout:g} s")
            except OSError as exc:
                return TypeCheck(incomplete=f"the type checker could not start ({exc.strerror})")
    except OSError as exc:
        return TypeCheck(incomplete=f"the type check could not write its files ({exc.strerror})")
    if done.returncode != 0:
        return TypeCheck(incomplete=_ended(done.returncode))
    try:
        return TypeCheck(findings=tuple(_findings(done.stdout)))
    except (ValueError, TypeError, KeyError):
        return TypeCheck(incomplete="the type checker's report could not be read")


def _ended(code: int) -> str:
    if code < 0:
        return f"the type checker was stopped by signal {-code} (a limit of time or memory)"
    return f"the type checker failed (exit status {code})"


def _findings(report: bytes) -> list[Finding]:
    found = []
    for item in json.loads(report):
        rule = str(item["check_name"])
        if rule in _NOT_FINDINGS or item.get("severity") not in _ERROR_SEVERITIES:
            continue
        line = item["location"]["positions"]["begin"]["line"]
        if item["location"].get("path") != "cell.py" or not isinstance(line, int):
            continue
        message = str(item["description"]).removeprefix(f"{rule}: ")
        if len(message) > _MAX_MESSAGE_CHARS:
            message = message[:_MAX_MESSAGE_CHARS] + "..."
        shown = visible(f"{message} [{rule}]", strict=True, single_line=True)
        found.append(Finding(line, "type_error", shown))
    return sorted(found, key=lambda f: f.line)


def checker_missing_advice() -> str:
    """What to install when the checker is missing."""
    return (
        '[check] mode = "all" needs the type checker ty: install it beside the bridge '
        "(`pip install 'ty>=1.0,<2'` in the bridge's environment) or put `ty` on PATH"
    )
