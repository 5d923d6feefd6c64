"""Which type checker can check a cell before it runs: time, memory and false positives, measured.

Each candidate (ty, mypy, pyright: whichever is installed) checks a realistic cell (20 lines of
pandas with two nested calls, top-level ``await``, a name from an earlier cell) and two broken
cells, each written to a file in a private temporary directory, in a child process, with no
third-party packages visible (the host bridge has no pandas; the sandbox does). "cold" is a new
cache directory each run; "warm" reuses one (the checker's own cache, where it has one). Findings
on the correct cell that are not about an unresolved import or name are false positives.

    hatch run types:python bench/check_checkers.py [--runs 10]

ty and mypy are found beside this Python (the types environment has both) or on PATH, pyright
on PATH (``npm install pyright``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

GOOD = """\
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
BAD_TYPES = """\
import pandas as pd
x: int = "hello"
def f(a: int) -> str:
    return a
y = f("no")
z = 1 + "a"
"""
BAD_ATTRIBUTE = """\
total = 0
for i in range(10):
    total += i
name = "abc"
print(name.uppercase())
len(5)
"""
CELLS = {"good (pandas, 20 lines)": GOOD, "3 type errors": BAD_TYPES, "2 errors": BAD_ATTRIBUTE}

# What is never a finding: a module the host lacks, a name an earlier cell or the sandbox
# defines, and top-level await (a syntax error to a module checker, legal in a cell).
NOT_FINDINGS = re.compile(
    r"import-not-found|unresolved-import|unresolved-reference|possibly-unresolved|"
    r"\[import|\[name-defined\]|\[top-level-await\]|"
    r"reportMissingImports|reportMissingModuleSource|reportUndefinedVariable|"
    r"await.*(outside|allowed only)|outside of an async|invalid-syntax",
    re.IGNORECASE,
)


def _empty_prefix(root: Path) -> Path:
    """A Python prefix with an empty site-packages: no third-party package is visible."""
    prefix = root / "prefix"
    (prefix / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages").mkdir(
        parents=True, exist_ok=True
    )
    return prefix


def _beside(name: str) -> str | None:
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else shutil.which(name)


def ty_command(work: Path, cache: Path, cell: Path) -> list[str] | None:
    ty = _beside("ty")
    if ty is None:
        return None
    return [
        ty, "check", "--python", str(_empty_prefix(work)), "--python-version", "3.12",
        "--output-format", "concise", "--no-progress", "--color", "never", str(cell),
    ]  # fmt: skip


def mypy_command(work: Path, cache: Path, cell: Path) -> list[str] | None:
    if _beside("mypy") is None:
        return None
    return [
        sys.executable, "-m", "mypy", "--no-site-packages", "--ignore-missing-imports",
        "--cache-dir", str(cache), "--python-version", "3.12", "--no-error-summary",
        "--hide-error-context", "--show-error-codes", str(cell),
    ]  # fmt: skip


def pyright_command(work: Path, cache: Path, cell: Path) -> list[str] | None:
    pyright = shutil.which("pyright") or _node_bin("pyright")
    if pyright is None:
        return None
    return [pyright, "--pythonversion", "3.12", str(cell)]


def _node_bin(name: str) -> str | None:
    for base in (Path.cwd(), Path(os.environ.get("PYRIGHT_DIR", "/nonexistent"))):
        candidate = base / "node_modules" / ".bin" / name
        if candidate.exists():
            return str(candidate)
    return None


CHECKERS: dict[str, Callable[[Path, Path, Path], list[str] | None]] = {
    "ty": ty_command,
    "mypy": mypy_command,
    "pyright": pyright_command,
}


def run_once(command: list[str], cwd: Path) -> tuple[float, int, str]:
    """Seconds, peak memory of the child (KiB) and its output."""
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(cwd), "XDG_CONFIG_HOME": str(cwd)}
    start = time.perf_counter()
    child = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    out = child.stdout.read() if child.stdout else b""
    _, _, usage = os.wait4(child.pid, 0)
    child.returncode = 0
    return time.perf_counter() - start, usage.ru_maxrss, out.decode("utf-8", "replace")


def findings(output: str) -> tuple[list[str], list[str]]:
    """(kept findings, dropped ones): lines that name a line of the cell."""
    kept, dropped = [], []
    for line in output.splitlines():
        if not re.search(r"cell\.py:\d+", line) or re.search(r"\bnote:|information", line):
            continue
        (dropped if NOT_FINDINGS.search(line) else kept).append(line.strip())
    return kept, dropped


def measure(name: str, runs: int) -> list[str] | None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cell = root / "cell.py"
        cache = root / "cache"
        if CHECKERS[name](root, cache, cell) is None:
            return None
        for label, text in CELLS.items():
            cell.write_text(text, "utf-8")
            cold, warm, memory = [], [], []
            kept: list[str] = []
            for i in range(runs):
                fresh = root / f"cold{i}"
                command = CHECKERS[name](root, fresh, cell)
                assert command is not None
                seconds, kib, _ = run_once(command, root)
                cold.append(seconds)
                command = CHECKERS[name](root, cache, cell)
                assert command is not None
                seconds, kib, out = run_once(command, root)
                warm.append(seconds)
                memory.append(kib)
                kept, _ = findings(out)
            rows.append(
                f"| {name} | {label} | {statistics.median(cold) * 1000:.0f} | "
                f"{statistics.median(warm) * 1000:.0f} | {max(memory) / 1024:.0f} | {len(kept)} |"
            )
            if label.startswith("good") and kept:
                rows.extend(f"|   | false positive: {k[:90]} | | | | |" for k in kept)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    print("| checker | cell | cold p50 ms | warm p50 ms | peak MiB | findings |")
    print("|---|---|---|---|---|---|")
    for name in CHECKERS:
        rows = measure(name, args.runs)
        if rows is None:
            print(f"| {name} | not installed | | | | |")
        else:
            print("\n".join(rows), flush=True)


if __name__ == "__main__":
    main()
