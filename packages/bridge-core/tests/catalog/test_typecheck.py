"""The type check before running: the real ty on cells, in its bounded child process."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from bridge_core.catalog import MAX_CHECKED_CHARS, TypeCheck, find_type_checker, type_check

TY = find_type_checker()
pytestmark = pytest.mark.skipif(TY is None, reason="the type checker ty is not installed")

PANDAS_CELL = """\
import pandas as pd
import numpy as np
from mcp import runtime, mcp_servers

rows = await mcp_servers["filesystem"].read_file(path="/data/sales.csv")
now = await mcp_time.get_current_time(timezone="UTC")
df = pd.read_csv("/tmp/sales.csv")
df["total"] = df["price"] * df["qty"]
by_region = df.groupby("region")["total"].sum().sort_values(ascending=False)
top = by_region.head(5)
arr = np.asarray(top.values, dtype=float)
share = arr / arr.sum()
summary = {name: round(float(s), 3) for name, s in zip(top.index, share)}
print(summary, now, rows)
for region, value in top.items():
    print(f"{region}: {value:,.2f}")
mean = df["total"].mean()
result = [r for r in df.itertuples() if r.total > mean]
print(runtime.discovered_servers())
len(result), earlier_variable
"""


def check(code: str, timeout: float | None = None) -> TypeCheck:
    assert TY is not None
    return type_check(code, TY) if timeout is None else type_check(code, TY, timeout=timeout)


def test_correct_pandas_code_with_nested_calls_has_no_finding_without_pandas_on_the_host() -> None:
    outcome = check(PANDAS_CELL)
    assert outcome.findings == ()
    assert outcome.incomplete is None


def test_a_type_error_is_a_finding_at_its_line() -> None:
    outcome = check('total = 0\nname = "abc"\nprint(name.uppercase())\n')
    assert [(f.line, f.kind) for f in outcome.findings] == [(3, "type_error")]
    assert "uppercase" in outcome.findings[0].message


def test_names_of_earlier_cells_and_of_the_sandbox_are_not_findings() -> None:
    cell = "df2 = df.dropna()\nprint(helper(df2), runtime, mcp_servers, mcp_time)\nx: int = 3\n"
    assert check(cell).findings == ()


def test_top_level_await_is_not_an_error_and_its_value_is_still_typed() -> None:
    cell = "async def f() -> str:\n    return 'a'\n\nx: int = await f()\nawait g()\n"
    outcome = check(cell)
    assert [(f.line, f.kind) for f in outcome.findings] == [(4, "type_error")]


def test_a_syntax_error_is_left_to_the_sandbox() -> None:
    assert check("def broken(:\n    pass\n") == TypeCheck()


def test_a_checker_that_cannot_finish_in_time_gives_no_finding_and_says_why() -> None:
    # 200 KB of statements with a bound no process can meet: the check is cut off, never waited.
    cell = "".join(f"v{i} = v{i - 1} + 1\n" for i in range(1, 13000))
    assert 150_000 < len(cell) < MAX_CHECKED_CHARS
    outcome = check(cell, timeout=0.001)
    assert outcome.findings == ()
    assert outcome.incomplete is not None
    assert "did not finish" in outcome.incomplete


def test_a_cell_over_the_size_bound_is_not_checked() -> None:
    outcome = check("x = 1\n" * (MAX_CHECKED_CHARS // 6 + 1))
    assert outcome.findings == ()
    assert outcome.incomplete is not None


def test_text_of_the_cell_in_a_finding_cannot_forge_lines() -> None:
    # Real line feeds, a bidi override and an ESC inside a string literal whose type ty quotes.
    hostile = 'x: int = """a\nline 1: forged\u202e\x1b[2J"""\n'
    outcome = check(hostile)
    assert outcome.findings
    for finding in outcome.findings:
        assert "\n" not in finding.message
        assert "\r" not in finding.message
        assert "\u202e" not in finding.message
        assert "\x1b" not in finding.message


def test_a_missing_checker_is_a_reason_not_an_error() -> None:
    outcome = type_check("x: int = 'a'\n", "/nonexistent/ty")
    assert outcome.findings == ()
    assert outcome.incomplete is not None


def test_a_temporary_directory_that_is_gone_is_a_reason_not_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The host's temporary directory removed under a running bridge (or a full disk): the check
    # cannot write the cell, which must not fail the call the check only advises on.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "gone"))
    outcome = check("x: int = 'a'\n")
    assert outcome.findings == ()
    assert outcome.incomplete is not None
    assert "could not write its files" in outcome.incomplete
