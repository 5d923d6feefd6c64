"""The check before running: literal nested calls against the real reference servers' tools."""

from __future__ import annotations

import json
import time
import tomllib
from pathlib import Path

import pytest
from bridge_core.catalog import MAX_CHECKED_CHARS, CheckCatalog, ToolDoc, check_cell

FIXTURES = Path(__file__).parent / "fixtures"
SERVERS = ("everything", "filesystem", "memory", "time")


def _docs(server: str) -> list[ToolDoc]:
    data = json.loads((FIXTURES / f"tools_{server}.json").read_text(encoding="utf-8"))
    return [ToolDoc.from_json(server, tool) for tool in data["tools"]]


CATALOG = CheckCatalog({s: _docs(s) for s in SERVERS}, SERVERS)
CELLS = tomllib.loads((FIXTURES / "check_cells.toml").read_text(encoding="utf-8"))


def kinds(code: str, catalog: CheckCatalog = CATALOG) -> list[str]:
    return [f.kind for f in check_cell(code, catalog)]


# --- each kind of finding ------------------------------------------------------------------


def test_unknown_argument_is_found_with_the_closest_declared_name() -> None:
    [finding] = check_cell(
        'x = 1\nt = await mcp_servers["filesystem"].read_text_file(path="/a", haed=10)',
        CATALOG,
    )
    assert (finding.kind, finding.line, finding.suggestions) == ("unknown_argument", 2, ("head",))


def test_unknown_argument_in_place_of_a_missing_required_one_suggests_it() -> None:
    findings = check_cell('await mcp_time.get_current_time(tz="UTC")', CATALOG)
    assert [f.kind for f in findings] == ["unknown_argument", "missing_argument"]
    assert findings[0].suggestions == ("timezone",)


def test_unknown_tool_gets_the_same_did_you_mean_as_a_call() -> None:
    [finding] = check_cell('await mcp_time.get_curent_time(timezone="UTC")', CATALOG)
    assert (finding.kind, finding.suggestions[0]) == ("unknown_tool", "get_current_time")


def test_unknown_server_is_found_in_every_literal_form() -> None:
    for code in (
        'await mcp_servers["tme"].get_current_time(timezone="UTC")',
        'await mcp_servers.tme.get_current_time(timezone="UTC")',
        "from mcp import mcp_tme",
        "from mcp.servers.tme import get_current_time",
        "import mcp\nawait mcp.servers.tme.get_current_time(timezone='UTC')",
    ):
        findings = check_cell(code, CATALOG)
        assert [f.kind for f in findings] == ["unknown_server"], code
        assert findings[0].suggestions == ("time",)


def test_missing_required_argument_is_found() -> None:
    assert kinds("await mcp_everything.get_sum(a=1)") == ["missing_argument"]


def test_literal_of_the_wrong_json_type_is_found_and_ints_pass_for_numbers() -> None:
    assert kinds('await mcp_everything.get_sum(a=1, b="2")') == ["wrong_type"]
    assert kinds("await mcp_everything.get_sum(a=1, b=-2.5)") == []
    assert kinds('await mcp_memory.open_nodes(names="Ada")') == ["wrong_type"]
    assert kinds('await mcp_memory.open_nodes(names=[f"A{1}"])') == []


def test_unknown_key_of_a_typed_result_names_the_declared_keys() -> None:
    [finding] = check_cell(
        'r = await mcp_everything.get_structured_content(location="x")\nprint(r["temp"])',
        CATALOG,
    )
    assert (finding.kind, finding.line, finding.suggestions) == (
        "unknown_result_key",
        2,
        ("temperature",),
    )


def test_a_result_handed_over_as_its_only_string_field_is_not_subscripted() -> None:
    code = 'r = await mcp_filesystem.read_text_file(path="/a")\nr["content"]'
    assert kinds(code) == ["unknown_result_key"]


def test_every_call_form_of_the_sandbox_is_checked() -> None:
    for code in (
        'await mcp_servers["time"].get_current_time(zone="UTC")',
        'await mcp_servers["time"]["get_current_time"](zone="UTC")',
        'await mcp_servers.time.get_current_time(zone="UTC")',
        'from mcp import mcp_time\nawait mcp_time.get_current_time(zone="UTC")',
        'import mcp_time\nawait mcp_time.get_current_time(zone="UTC")',
        'from mcp import mcp_time as t\nawait t.get_current_time(zone="UTC")',
        'from mcp.servers.time import get_current_time\nawait get_current_time(zone="UTC")',
        'from mcp.servers.time import get_current_time as g\nawait g(zone="UTC")',
        'from mcp.servers import time as tm\nawait tm.get_current_time(zone="UTC")',
        'mcp_time.get_current_time.sync(zone="UTC")',
        'await mcp_time.get_current_time({"zone": "UTC"})',
        'await mcp_everything["get-sum"](a=1, b=2, c=3)',
        "await mcp_everything.get_sum(a=1, b=2, c=3)",
    ):
        assert "unknown_argument" in kinds(code), code


# --- what is left to run time --------------------------------------------------------------


def test_dynamic_names_and_rebound_names_are_never_guessed() -> None:
    for code in (
        'name = "tme"\nawait mcp_servers[name].get_current_time(timezone="UTC")',
        'tool = "nope"\nawait mcp_time[tool](timezone="UTC")',
        'await getattr(mcp_time, "nope")()',
        'mcp_servers = {"tme": 1}\nmcp_servers["tme"]',
        "mcp_time = object()\nmcp_time.nope()",
        "mcp_data.nope(x=1)",  # a variable of an earlier cell, not a server
        'args = {"tz": "UTC"}\nawait mcp_time.get_current_time(**args)',
        'r = await mcp_time.get_current_time(timezone="UTC")\nr = {}\nr["x"]',
        'r = await mcp_time.get_current_time(timezone="UTC", raw=True)\nr["content"]',
        'k = "x"\nr = await mcp_time.get_current_time(timezone="UTC")\nr[k]',
        "list(mcp_servers.keys())\nmcp_servers.get('x')",
    ):
        assert kinds(code) == [], code


def test_a_server_whose_tools_are_not_known_yet_is_not_judged() -> None:
    catalog = CheckCatalog({"time": None}, ["time"])
    assert kinds('await mcp_time.nope(x="UTC")', catalog) == []
    assert kinds('await mcp_servers["tme"].nope()', catalog) == ["unknown_server"]


def test_a_tool_a_provisional_list_lacks_is_left_to_run_time_its_known_ones_checked() -> None:
    # A list from the cache of an earlier start, or with a change announced and not listed yet,
    # may lack a tool the server has now.
    catalog = CheckCatalog({"time": _docs("time")}, ["time"], provisional=["time"])
    assert kinds('await mcp_time.added_since(x="UTC")', catalog) == []
    assert kinds('await mcp_time.get_current_time(tz="UTC")', catalog) == [
        "unknown_argument",
        "missing_argument",
    ]
    assert kinds('await mcp_time.added_since(x="UTC")') == ["unknown_tool"]


def test_a_name_the_policy_refuses_is_left_to_the_call() -> None:
    hidden = CheckCatalog({"time": _docs("time")}, ["time", "secret"])
    assert kinds("await mcp_servers['secret'].anything()", hidden) == []
    denied = CheckCatalog(
        {"time": _docs("time")}, ["time"], lambda server, tool: tool != "convert_time"
    )
    assert kinds("await mcp_time.convert_time()", denied) == []


# --- evidence: realistic cells, one mistake each, and correct ones ---------------------------


@pytest.mark.parametrize("cell", CELLS["correct"], ids=lambda c: c["code"].strip()[:40])
def test_correct_cell_has_no_finding(cell: dict[str, str]) -> None:
    assert check_cell(cell["code"], CATALOG) == []


@pytest.mark.parametrize(
    "cell", [c for c in CELLS["mistake"] if c["kind"]], ids=lambda c: c["kind"]
)
def test_cell_with_one_mistake_is_stopped_for_it(cell: dict[str, str]) -> None:
    assert cell["kind"] in kinds(cell["code"])


def test_fixture_figures_meet_the_goal() -> None:
    mistakes = CELLS["mistake"]
    stopped = sum(1 for c in mistakes if check_cell(c["code"], CATALOG))
    blocked = sum(1 for c in CELLS["correct"] if check_cell(c["code"], CATALOG))
    assert len(mistakes) >= 20
    assert len(CELLS["correct"]) >= 20
    assert stopped / len(mistakes) >= 0.9
    assert blocked == 0


# --- hostile input ---------------------------------------------------------------------------


def test_deep_nesting_has_no_finding_and_does_not_crash() -> None:
    assert check_cell("(" * 10_000 + ")" * 10_000, CATALOG) == []
    assert check_cell("x = " + "-" * 100_000 + "1", CATALOG) == []
    assert check_cell("[" * 10_000 + "]" * 10_000, CATALOG) == []


def test_code_over_the_bound_is_not_checked_and_costs_nothing() -> None:
    code = "await mcp_time.nope()\n" + "x = 1\n" * (MAX_CHECKED_CHARS // 6)
    started = time.perf_counter()
    assert check_cell(code, CATALOG) == []
    assert time.perf_counter() - started < 0.1


def test_unparsable_code_has_no_finding() -> None:
    for code in ("def (:", "x = '\0'", "\udcff = 1", "await mcp_time.nope(\n", "\x00"):
        assert check_cell(code, CATALOG) == [], repr(code)


def test_odd_strings_in_names_and_arguments_are_reported_bounded() -> None:
    name = "\udcff\u202e" + "x" * 10_000
    code = f"await mcp_time.get_current_time({{'timezone': 'UTC', {name!r}: 1}})"
    [finding] = check_cell(code, CATALOG)
    assert finding.kind == "unknown_argument"
    assert len(finding.message) < 600
    assert kinds(f"await mcp_servers[{name!r}].x()") == ["unknown_server"]


def test_a_tool_whose_schema_declares_no_argument_takes_any_unless_closed_explicitly() -> None:
    # Tools with an empty input schema that read whatever they are given exist (the probe
    # server's tools added at run time): an argument to one is not a finding.
    empty = {"type": "object", "properties": {}}
    open_ = ToolDoc.from_json("p", {"name": "x.echo", "inputSchema": empty})
    shut = ToolDoc.from_json(
        "p", {"name": "shut", "inputSchema": {**empty, "additionalProperties": False}}
    )
    catalog = CheckCatalog({"p": [open_, shut]}, ("p",))
    assert kinds("await mcp_servers['p']['x.echo'](value='v')", catalog) == []
    assert kinds("await mcp_servers['p'].shut(value='v')", catalog) == ["unknown_argument"]
