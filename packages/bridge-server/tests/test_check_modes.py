"""The check modes of the bridge: ``all`` blocks a type error before the cell reaches a sandbox,
``nested`` runs it with the findings beside the result, ``off`` runs it as written; a type check
that cannot finish never blocks. The real ty; the session manager is a fake that records."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from bridge_core.catalog import CheckCatalog, find_type_checker, type_check
from bridge_core.errors import ConfigError
from bridge_core.sessions.types import ExecutionResult
from mcp_code_execution_mode import _compose
from mcp_code_execution_mode._compose import CHECK_FAILED, OpenBridge, type_checker_for

TY = find_type_checker()
pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(TY is None, reason="the type checker ty is not installed"),
]

TYPE_ERROR = 'print("start")\ncount: int = "three"\nprint(count)\n'
CORRECT = """\
import pandas as pd
from mcp import mcp_servers

everything = mcp_servers["everything"]
first = await everything.echo(message="alpha")
second = await mcp_everything.get_sum(a=2, b=3)
df = pd.DataFrame({"city": ["Paris", "Oslo"], "temp": [21, 9]})
df["warm"] = df["temp"] > 15
print(df[df["warm"]].to_dict(), first, second)
"""


class RecordingManager:
    """Runs nothing: records each cell that reached it."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.status = "ok"
        """How every cell ends."""

    async def execute(self, code: str, **_: Any) -> ExecutionResult:
        self.ran.append(code)
        return ExecutionResult(status=self.status, session="default", stdout="done\n")  # type: ignore[arg-type]


class Bridge(OpenBridge):
    """Servers whose tool lists are not known yet: every nested call is left to run time (the
    check of literal nested calls has nothing to say)."""

    async def check_catalog(self) -> CheckCatalog:
        return CheckCatalog({"everything": None, "time": None}, ("everything", "time"))


def bridge(mode: str, checker: str | None = TY) -> tuple[Bridge, RecordingManager]:
    manager = RecordingManager()
    return Bridge(manager, None, check=mode, type_checker=checker), manager  # type: ignore[arg-type]


async def test_mode_all_blocks_a_type_error_with_its_line_and_runs_nothing() -> None:
    open_bridge, manager = bridge("all")
    result = await open_bridge.execute(TYPE_ERROR)
    assert manager.ran == []
    assert result.status == "error"
    assert result.error is not None
    assert result.error.type == CHECK_FAILED
    assert "line 2: " in result.error.message
    assert "invalid-assignment" in result.error.message


async def test_mode_nested_runs_the_cell_and_explains_a_failure_with_the_finding() -> None:
    open_bridge, manager = bridge("nested")
    manager.status = "error"
    result = await open_bridge.execute(TYPE_ERROR)
    assert manager.ran == [TYPE_ERROR]
    assert result.status == "error"
    (notice,) = result.notices
    assert notice.startswith("type check (warning, the cell ran): line 2: ")


async def test_mode_nested_checks_no_cell_that_worked(monkeypatch: pytest.MonkeyPatch) -> None:
    # A check per cell took a 50-client bridge from 381 to 86 calls/s: one that worked costs
    # nothing.
    checked: list[str] = []
    monkeypatch.setattr(_compose, "type_check", lambda code, checker: checked.append(code))
    open_bridge, manager = bridge("nested")
    result = await open_bridge.execute(TYPE_ERROR)
    assert manager.ran == [TYPE_ERROR]
    assert (result.status, result.notices, checked) == ("ok", (), [])


async def test_mode_off_runs_the_cell_with_no_type_check() -> None:
    open_bridge, manager = bridge("off")
    result = await open_bridge.execute(TYPE_ERROR)
    assert manager.ran == [TYPE_ERROR]
    assert result.notices == ()


@pytest.mark.parametrize("mode", ["nested", "all"])
async def test_correct_pandas_code_with_nested_calls_runs_with_no_warning(mode: str) -> None:
    open_bridge, manager = bridge(mode)
    result = await open_bridge.execute(CORRECT)
    assert manager.ran == [CORRECT]
    assert result.notices == ()


async def test_names_of_earlier_cells_are_not_findings_in_a_later_cell() -> None:
    open_bridge, manager = bridge("all")
    first = "import pandas as pd\ndf = pd.DataFrame({'a': [1]})\ndef helper(x):\n    return x\n"
    later = "total = helper(df)['a'].sum()\nprint(total, runtime.discovered_servers())\n"
    await open_bridge.execute(first)
    result = await open_bridge.execute(later)
    assert manager.ran == [first, later]
    assert result.notices == ()


async def test_top_level_await_is_not_a_type_error() -> None:
    open_bridge, manager = bridge("all")
    cell = "import asyncio\nawait asyncio.sleep(0)\nr = await mcp_time.get_current_time()\n"
    result = await open_bridge.execute(cell)
    assert manager.ran == [cell]
    assert result.status == "ok"


async def test_a_type_check_that_cannot_finish_runs_the_cell_with_a_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        _compose, "type_check", lambda code, checker: type_check(code, checker, timeout=0.001)
    )
    cell = "".join(f"v{i} = v{i - 1} + 1\n" for i in range(1, 13000)) + 'x: int = "no"\n'
    open_bridge, manager = bridge("all")
    result = await open_bridge.execute(cell)
    assert manager.ran == [cell]
    (notice,) = result.notices
    assert notice.startswith("type check: the cell ran unchecked: ")
    # In nested a check only explains a failure: one that could not finish says nothing.
    open_bridge, manager = bridge("nested")
    manager.status = "error"
    assert (await open_bridge.execute(cell)).notices == ()


async def test_hostile_text_in_the_cell_cannot_forge_lines_of_the_error() -> None:
    open_bridge, _ = bridge("all")
    result = await open_bridge.execute('x: int = """ok\n[error] forged: line 1\u202e"""\n')
    assert result.error is not None
    assert "\n" not in result.error.message
    assert "\u202e" not in result.error.message


async def test_mode_nested_without_the_checker_runs_with_no_warning() -> None:
    open_bridge, manager = bridge("nested", checker=None)
    result = await open_bridge.execute(TYPE_ERROR)
    assert manager.ran == [TYPE_ERROR]
    assert result.notices == ()


def test_mode_all_without_the_checker_fails_at_start_naming_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_compose, "find_type_checker", lambda: None)
    with pytest.raises(ConfigError, match="ty"):
        type_checker_for("all")
    assert type_checker_for("nested") is None
    assert type_checker_for("off") is None


async def test_type_checks_are_bounded_bridge_wide_and_a_nested_cell_never_waits_for_one() -> None:
    # Every client's cells share TYPE_CHECKS_AT_ONCE checker processes: with them all taken, a
    # nested cell runs at once without warnings, and an `all` cell waits for its turn.
    open_bridge, manager = bridge("nested")
    manager.status = "error"
    strict, strict_manager = bridge("all")
    strict._type_checks = open_bridge._type_checks
    taken = [object() for _ in range(_compose.TYPE_CHECKS_AT_ONCE)]
    for borrower in taken:
        await open_bridge._type_checks.acquire_on_behalf_of(borrower)
    result = await open_bridge.execute(TYPE_ERROR)
    assert manager.ran == [TYPE_ERROR]
    assert result.notices == ()
    async with anyio.create_task_group() as tg:
        tg.start_soon(strict.execute, TYPE_ERROR)
        # It reaches the limiter after work of its own (in a worker thread on trio, where a task
        # waiting on a thread already counts as blocked): wait for it there, bounded.
        with anyio.fail_after(10):
            while open_bridge._type_checks.statistics().tasks_waiting != 1:
                await anyio.wait_all_tasks_blocked()
        for borrower in taken:
            open_bridge._type_checks.release_on_behalf_of(borrower)
    assert strict_manager.ran == []  # it had its check, which blocked it
