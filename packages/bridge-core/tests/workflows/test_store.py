"""The workflow store: versions, principals kept apart, names never paths, bounds, privacy."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from bridge_core.workflows import WorkflowError, WorkflowLimits, WorkflowStore, read_function
from bridge_protocol import ErrorCode

SOURCE = (
    "async def report(month: str) -> str:\n"
    '    """Sales of a month, summarised."""\n'
    "    rows = await mcp_servers['filesystem'].read_text_file(path=month)\n"
    "    await mcp_memory.create_entities(entities=[])\n"
    "    from mcp.servers.time import get_current_time\n"
    "    return runtime.workflow('helper')(rows)\n"
)
ALICE = 'principal:["alice", null, "alice"]'
BOB = 'principal:["bob", null, "bob"]'


@pytest.fixture
def store(tmp_path: Path) -> Iterator[WorkflowStore]:
    opened = WorkflowStore(tmp_path / "workflows")
    opened.open()
    yield opened
    opened.close()


def test_the_source_is_read_for_its_function_signature_docstring_and_tools() -> None:
    facts = read_function(SOURCE)
    assert (facts.function, facts.is_async, facts.signature) == (
        "report",
        True,
        "(month: str) -> str",
    )
    assert facts.docstring == "Sales of a month, summarised."
    assert facts.tools == (
        "filesystem.read_text_file",
        "memory.create_entities",
        "time.get_current_time",
    )
    assert facts.workflows == ("helper",)


@pytest.mark.parametrize(
    "source",
    [
        "x = 1\n",
        "def a():\n    pass\ndef b():\n    pass\n",
        "import os\ndef a():\n    pass\n",
        "@staticmethod\ndef a():\n    pass\n",
        "class A:\n    pass\n",
        "def a(:\n",
        "(" * 10_000 + ")" * 10_000,
        "",
    ],
)
def test_anything_but_one_plain_function_is_refused(source: str) -> None:
    with pytest.raises(WorkflowError) as refused:
        read_function(source)
    assert refused.value.code == ErrorCode.INVALID_ARGUMENTS


@pytest.mark.parametrize(
    ("source", "shown"),
    [
        # `cat` prints the comment over the call: what a reviewer reads is not what runs.
        ("def f():\n    evil()\r# a long comment that hides the call\n", "\\r on line 2"),
        ("def f():\n    x = 1  # \u202e)(live\n    return x\n", "\\u202e on line 2"),
        ("def f():\n    return 1\u200b\n", "\\u200b on line 2"),
        ("def f():\n    return '\x1b[2K'\n", "\\x1b on line 2"),
    ],
)
def test_a_source_that_displays_other_than_it_runs_is_refused(source: str, shown: str) -> None:
    with pytest.raises(WorkflowError) as refused:
        read_function(source)
    assert shown in refused.value.message


def test_crlf_lines_tabs_and_emoji_in_strings_are_fine() -> None:
    facts = read_function("def f():\r\n\treturn '\U0001f44d\u200d'\r\n")
    assert facts.function == "f"


def test_saving_again_makes_a_new_version_and_older_ones_stay(store: WorkflowStore) -> None:
    first = store.save(None, "report", SOURCE, "v1", session="s")
    second = store.save(None, "report", SOURCE.replace("summarised", "in short"), "v2")
    assert (first.version, second.version) == (1, 2)
    assert store.get(None, "report").version == 2
    assert "summarised" in store.get(None, "report", 1).source
    ((latest, versions),) = store.list_with_versions(None)
    assert (latest.description, versions) == ("v2", [1, 2])


def test_principals_see_only_their_own_workflows(store: WorkflowStore) -> None:
    store.save(ALICE, "report", SOURCE)
    assert store.latest(BOB) == []
    assert store.latest(None) == []
    with pytest.raises(WorkflowError) as unknown:
        store.get(BOB, "report")
    assert unknown.value.code == ErrorCode.UNKNOWN_TOOL
    with pytest.raises(WorkflowError):
        store.delete(BOB, "report")
    assert [w.name for w in store.latest(ALICE)] == ["report"]


@pytest.mark.parametrize(
    "name", ["../x", "a/b", "", "x" * 65, "1abc", "é", "a.b", "a\nb", "con\0", " a"]
)
def test_a_name_that_is_not_an_identifier_is_refused_and_makes_no_file(
    store: WorkflowStore, name: str
) -> None:
    with pytest.raises(WorkflowError):
        store.save(None, name, SOURCE)
    assert not list(store.root.rglob("*.json"))


def test_no_file_or_directory_name_comes_from_a_workflow_name(store: WorkflowStore) -> None:
    store.save(ALICE, "Report", SOURCE)
    store.save(ALICE, "report", SOURCE)
    names = [p.name for p in store.root.rglob("*")]
    assert not [n for n in names if "report" in n.lower() or "alice" in n]
    assert len(store.latest(ALICE)) == 2  # apart even where the disk ignores case


def test_files_and_directories_are_private(store: WorkflowStore) -> None:
    store.save(None, "report", SOURCE)
    for path in [store.root, *store.root.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode & 0o077 == 0, (path, oct(mode))


def test_bounds_are_named_in_their_errors(tmp_path: Path) -> None:
    limits = WorkflowLimits(max_names=3, max_versions=2, max_source_bytes=400, max_total_bytes=1400)
    store = WorkflowStore(tmp_path, limits)
    store.open()
    store.save(None, "a", "def a():\n    pass\n")
    store.save(None, "a", "def a():\n    return 1\n")
    with pytest.raises(WorkflowError, match="2 versions, the most"):
        store.save(None, "a", "def a():\n    return 2\n")
    store.save(None, "b", "def b():\n    pass\n")
    store.save(None, "c", "def c():\n    pass\n")
    with pytest.raises(WorkflowError, match="3 workflows are saved, the most"):
        store.save(None, "d", "def d():\n    pass\n")
    with pytest.raises(WorkflowError, match="at most 400 bytes"):
        store.save(None, "a", "def a():\n    return '" + "x" * 400 + "'\n")
    store.delete(None, "a")
    store.save(None, "big", "def big():\n    return '" + "x" * 350 + "'\n")
    with pytest.raises(WorkflowError, match="at most 1400 bytes"):
        store.save(None, "big", "def big():\n    return '" + "y" * 350 + "'\n")
    store.close()


def test_ten_thousand_saves_stay_within_the_bounds(tmp_path: Path) -> None:
    store = WorkflowStore(tmp_path)
    store.open()
    refused = 0
    for n in range(10_000):
        try:
            store.save(None, f"w{n % 150}", f"def w{n % 150}():\n    return {n}\n")
        except WorkflowError:
            refused += 1
    assert len(store.latest(None)) == 100
    assert all(len(v) <= 20 for _, v in store.list_with_versions(None))
    assert refused == 10_000 - 100 * 20
    store.close()


def test_deleting_one_version_keeps_the_others_and_deleting_all_removes_it(
    store: WorkflowStore,
) -> None:
    for _ in range(3):
        store.save(None, "report", SOURCE)
    assert store.delete(None, "report", 2) == [2]
    assert [v for _, v in store.list_with_versions(None)] == [[1, 3]]
    assert store.save(None, "report", SOURCE).version == 4  # numbers are never reused
    assert store.delete(None, "report") == [1, 3, 4]
    assert store.latest(None) == []


def test_a_file_damaged_on_disk_is_skipped(store: WorkflowStore) -> None:
    store.save(None, "report", SOURCE)
    store.save(None, "other", "def other():\n    pass\n")
    (victim,) = [p for p in store.root.rglob("*.json") if "report" in p.read_text()]
    victim.write_text(json.dumps({"name": "../../etc", "versions": []}))
    assert [w.name for w in store.latest(None)] == ["other"]


def test_anonymous_clients_workflows_end_with_them_and_with_the_bridge(
    store: WorkflowStore,
) -> None:
    anonymous, other = "mcp-session:" + "a" * 32, "mcp-session:" + "b" * 32
    store.save(anonymous, "report", SOURCE)
    store.save(other, "report", SOURCE)
    assert store.latest(None) == []
    store.forget(anonymous)
    assert store.latest(anonymous) == []
    assert len(store.latest(other)) == 1
    store.close()
    assert not [p for p in store.root.iterdir() if p.name.startswith(".anonymous-")]


def test_a_dead_bridges_anonymous_workflows_are_swept_at_the_next_start(tmp_path: Path) -> None:
    root = tmp_path / "workflows"
    code = (
        "import os, sys\nfrom pathlib import Path\n"
        "from bridge_core.workflows import WorkflowStore\n"
        "s = WorkflowStore(Path(sys.argv[1])); s.open()\n"
        "s.save('mcp-session:x', 'a', 'def a():\\n    pass\\n')\n"
        "os._exit(0)\n"  # dies without closing
    )
    subprocess.run([sys.executable, "-c", code, str(root)], check=True)
    assert [p for p in root.iterdir() if p.name.startswith(".anonymous-")]
    running = WorkflowStore(root)
    running.open()
    running.save("mcp-session:y", "a", "def a():\n    pass\n")
    later = WorkflowStore(root)
    later.open()  # sweeps the dead bridge's, keeps the running one's
    assert len([p for p in root.iterdir() if p.name.startswith(".anonymous-")]) == 1
    assert len(running.latest("mcp-session:y")) == 1
    running.close()
    later.close()
    assert os.listdir(root) == []
