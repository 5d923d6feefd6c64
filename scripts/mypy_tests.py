"""mypy over the tests: each test tree in its own run, as pytest imports it.

The tests have no ``__init__.py`` (pytest's importlib mode), so two trees may both hold a
``conftest.py`` or a ``test_names.py``: one mypy run over all of them would refuse the duplicate
module names. Each tree is checked alone, with itself on ``MYPYPATH`` so its helpers resolve as
pytest resolves them. The packages' own strictness applies (pyproject.toml), except
``warn_return_any``: tests return what ``json.loads`` and subprocess answers give (``Any``) all
the time, and annotating each would add nothing a failing assertion does not already say.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREES = [
    *sorted(p.relative_to(ROOT) for p in ROOT.glob("packages/*/tests")),
    Path("integration-tests"),
]


def main() -> int:
    failed = []
    for tree in TREES:
        env = {**os.environ, "MYPYPATH": str(tree)}
        command = [sys.executable, "-m", "mypy", "--no-warn-return-any", "--exclude", "/vectors/"]
        print(f"mypy {tree}", flush=True)
        if subprocess.run([*command, str(tree)], cwd=ROOT, env=env, check=False).returncode:
            failed.append(str(tree))
    if failed:
        print(f"mypy found errors in: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
