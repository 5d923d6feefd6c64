"""The check before running, with the real bridge and real servers: a wrong nested call is
stopped before any line of its cell runs, correct code runs unchanged, and ``[check] mode =
"off"`` restores running every cell as written."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import bridge_text, code_text, open_bridge, real_servers

pytestmark = pytest.mark.container

# The lists of the servers the cells name are known once something asked for them (a server's
# list is never guessed: before that, its calls are left to run time).
KNOW_LISTS = "[len(await runtime.list_tools(s)) > 0 for s in ('everything', 'memory')]"
TYPO = (
    "print('before')\n"
    "await mcp_memory.create_entities(entities=[{'name': 'early', 'entityType': 't', "
    "'observations': []}])\n"
    "w = await mcp_servers['everything'].get_structured_content(locaton='Paris')\n"
)
WRONG_KEY = (
    "w = await mcp_servers['everything'].get_structured_content(location='Chicago')\n"
    "print(w['temp'])\n"
)
CORRECT = """
import io
import pandas as pd
w = await mcp_servers["everything"].get_structured_content(location="Chicago")
total = await mcp_everything.get_sum(a=2, b=3)
df = pd.read_csv(io.StringIO("city,temp\\nParis,21\\nOslo,9\\n"))
df["delta"] = df["temp"] - w["temperature"]
graph = await mcp_memory.read_graph()
print(int(df["delta"].abs().sum() >= 0), total, sorted(graph))
"""


def _error(result: Any) -> dict[str, Any]:
    payload = result.structured_content or {}
    return payload.get("error") or {}


async def test_a_wrong_nested_call_is_blocked_before_any_line_runs_and_correct_code_runs(
    tmp_path: Path, sandbox_image: str, third_party: dict[str, str]
) -> None:
    servers = real_servers(third_party, tmp_path)
    async with open_bridge(tmp_path, servers=servers) as bridge:
        known = await bridge.run(KNOW_LISTS)
        unknown = await bridge.run("print('before')\nawait mcp_everything.get_summ(a=1, b=2)\n")
        typo = await bridge.run(TYPO)
        wrong_key = await bridge.run(WRONG_KEY)
        correct = await bridge.run(CORRECT)
        graph = await bridge.run("[e['name'] for e in (await mcp_memory.read_graph())['entities']]")
    assert code_text(known) == "[True, True]"
    # A running server's current list decides which tools exist.
    assert _error(unknown)["type"] == "CheckFailed", unknown
    assert "has no tool 'get_summ': did you mean 'get-sum'" in _error(unknown)["message"]
    assert "before" not in code_text(unknown)
    assert typo.is_error is True
    assert _error(typo)["type"] == "CheckFailed"
    assert "line 3" in _error(typo)["message"]
    assert "did you mean `location`?" in _error(typo)["message"]
    assert "before" not in code_text(typo)  # no line ran
    assert code_text(graph) == "[]"  # the earlier create_entities was never called
    assert _error(wrong_key)["type"] == "CheckFailed"
    assert "has no key `temp` (did you mean `temperature`?" in _error(wrong_key)["message"]
    assert correct.is_error is False, bridge_text(correct)
    assert code_text(correct) == "1 The sum of 2 and 3 is 5. ['entities', 'relations']"
    assert bridge_text(correct) == ""


async def test_check_mode_off_runs_the_cell_as_written(
    tmp_path: Path, sandbox_image: str, third_party: dict[str, str]
) -> None:
    servers = real_servers(third_party, tmp_path)
    (tmp_path / "bridge.toml").write_text('[check]\nmode = "off"\n', encoding="utf-8")
    async with open_bridge(tmp_path, servers=servers) as bridge:
        await bridge.run(KNOW_LISTS)
        typo = await bridge.run(TYPO)
        graph = await bridge.run("[e['name'] for e in (await mcp_memory.read_graph())['entities']]")
    assert _error(typo).get("type") != "CheckFailed"
    assert "before" in code_text(typo)
    assert code_text(graph) == "['early']"


TYPE_ERROR = "print('before')\ncount: int = 'three'\nprint(count + 1)\n"
"""A type error that also fails at run time (str + int): mode nested explains the failure."""


def _notices(result: Any) -> list[str]:
    return list((result.structured_content or {}).get("notices", []))


async def test_check_mode_all_blocks_a_type_error_and_nested_explains_its_failure_with_it(
    tmp_path: Path, sandbox_image: str, third_party: dict[str, str]
) -> None:
    servers = real_servers(third_party, tmp_path)
    (tmp_path / "bridge.toml").write_text('[check]\nmode = "all"\n', encoding="utf-8")
    async with open_bridge(tmp_path, servers=servers) as bridge:
        await bridge.run(KNOW_LISTS)
        blocked = await bridge.run(TYPE_ERROR)
        earlier = await bridge.run("def helper(x):\n    return x\n")
        correct = await bridge.run(CORRECT.replace("print(", "print(helper(1), "))
    assert blocked.is_error is True
    assert _error(blocked)["type"] == "CheckFailed"
    assert "line 2: " in _error(blocked)["message"]
    assert "before" not in code_text(blocked)  # no line ran
    assert earlier.is_error is False
    assert correct.is_error is False, bridge_text(correct)  # pandas, nested calls, helper
    assert _notices(correct) == []
    (tmp_path / "bridge.toml").write_text('[check]\nmode = "nested"\n', encoding="utf-8")
    async with open_bridge(tmp_path, servers=servers) as bridge:
        warned = await bridge.run(TYPE_ERROR)
        worked = await bridge.run("count: int = 'three'\nprint(count)\n")
    assert warned.is_error is True
    assert "before" in code_text(warned)
    assert "TypeError" in code_text(warned)
    assert _notices(worked) == []  # a cell that worked is not checked
    assert [n for n in _notices(warned) if n.startswith("type check (warning")]
    assert "[notice] type check (warning, the cell ran): line 2: " in bridge_text(warned)


GROWING_SERVER = """
import os
import sys

from mcp.server.mcpserver import MCPServer

app = MCPServer("growing")


@app.tool()
def first() -> str:
    return "first"


if os.path.exists(sys.argv[1]):

    @app.tool()
    def second(word: str) -> str:
        return "second " + word


app.run()
"""
"""A server that lists ``second`` only once the file named by its argument exists: a server
updated between two starts of the bridge."""


async def test_a_tool_the_cached_list_lacks_is_left_to_run_time_and_called(
    tmp_path: Path, sandbox_image: str
) -> None:
    script = tmp_path / "growing.py"
    script.write_text(GROWING_SERVER, encoding="utf-8")
    marker = tmp_path / "updated"
    servers = {"growing": {"command": sys.executable, "args": [str(script), str(marker)]}}
    async with open_bridge(tmp_path, servers=servers) as bridge:
        listed = await bridge.run("await runtime.list_tools('growing')")
    assert code_text(listed) == "['first']"
    marker.touch()  # the server now has `second`; the bridge's cache of its list does not
    async with open_bridge(tmp_path, servers=servers) as bridge:
        typo = await bridge.run("print('before')\nawait mcp_growing.frist()\n")
        new = await bridge.run("print(await mcp_growing.second(word='tool'))")
        wrong = await bridge.run("print('before')\nawait mcp_growing.second(wrod='x')\n")
    # A tool missing from a list that may be out of date runs: the call itself then knows.
    assert "before" in code_text(typo), typo
    assert "did you mean 'first'" in code_text(typo) + bridge_text(typo), typo
    assert new.is_error is False, new
    assert code_text(new) == "second tool"
    # The server's own list, once it ran, is checked before any line runs.
    assert _error(wrong)["type"] == "CheckFailed", wrong
    assert "did you mean `word`?" in _error(wrong)["message"]
    assert "before" not in code_text(wrong)
