"""The coverage gate of the README's test command: hold the figure, show what changed and is bare.

    python scripts/coverage_gate.py [--base REF]

Reads the ``.coverage`` data the test run wrote (``coverage run -m pytest``, in the same run as
the tests: no second pass), prints the total, fails (exit 1) when it is below ``fail_under`` in
pyproject.toml, and lists the uncovered lines of the Python files changed since ``--base``
(default: the last commit's parent), so a change arrives with its untested lines in view. Raise
``fail_under`` as the figure grows. Processes the tests start (the bridge, the sandbox client in
its container) are not measured: the figure is of the code the test process runs itself.
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
from pathlib import Path

import coverage

ROOT = Path(__file__).resolve().parents[1]


def changed_files(base: str) -> list[str]:
    done = subprocess.run(
        ["git", "diff", "--name-only", base, "--", "packages/*/src/*.py", "packages/*/src/**/*.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:  # a shallow clone has no parent: nothing to compare with
        return []
    return [f for f in done.stdout.split() if (ROOT / f).is_file()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="HEAD~1", help="git revision changes count from")
    options = parser.parse_args(argv)
    cov = coverage.Coverage(config_file=str(ROOT / "pyproject.toml"))
    cov.load()
    changed = changed_files(options.base)
    if changed:
        print(f"Uncovered lines of the files changed since {options.base}:")
        cov.report(include=[str(ROOT / f) for f in changed], show_missing=True, skip_covered=True)
    total = cov.report(file=io.StringIO())  # only the figure
    gate = float(cov.get_option("report:fail_under") or 0)
    print(f"coverage: {total:.1f}% of the packages' lines and branches (gate: {gate:g}%)")
    if total < gate:
        print(
            f"coverage: FAILED: {total:.1f}% is below the gate of {gate:g}% (pyproject.toml "
            "[tool.coverage.report] fail_under): add tests for the new code",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
