"""Export to reviewable ``.py`` files and import back: hostile files are refused, one by one."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from bridge_core.workflows import WorkflowStore, export_workflows, import_workflows

SOURCE = "def greet(name):\n    '''Say hello.'''\n    return mcp_servers['time'].now()\n"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[WorkflowStore]:
    opened = WorkflowStore(tmp_path / "workflows")
    opened.open()
    yield opened
    opened.close()


def test_export_then_import_into_another_principal_gives_the_same_workflows(
    store: WorkflowStore, tmp_path: Path
) -> None:
    store.save(None, "greet", SOURCE, "first\nline two\u2028 and \u202e bidi")
    store.save(None, "greet", SOURCE.replace("hello", "hi"))
    files = export_workflows(store, None, tmp_path / "out")
    assert [f.name for f in files] == ["greet.v1.py", "greet.v2.py"]
    text = files[0].read_text()
    header, _, body = text.partition("\n#\n")
    assert body == SOURCE
    assert header.splitlines()[2] == "# version: 1"
    assert '# description: "first\\nline two\\u2028 and \\u202e bidi"' in header
    assert '# tools: ["time.now"]' in header
    outcome = import_workflows(store, "principal:x", tmp_path / "out")
    assert outcome.refused == 0
    assert outcome.lines == [
        "greet.v1.py: imported as greet version 1",
        "greet.v2.py: imported as greet version 2",
    ]
    again = import_workflows(store, "principal:x", tmp_path / "out")
    assert again.lines[-1] == "greet.v2.py: already saved as greet version 2"
    assert store.get("principal:x", "greet", 1).description.startswith("first\nline two")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("def f():\n    pass\n", "first line"),
        (
            '# mcp-code-execution-mode workflow\n# name: "../../x"\n#\ndef f():\n    pass\n',
            "not a valid workflow name",
        ),
        ("# mcp-code-execution-mode workflow\n# name: f\n#\ndef f():\n    pass\n", "not JSON"),
        ('# mcp-code-execution-mode workflow\n# name: "f"\ndef f():\n    pass\n', "header line 3"),
        (
            '# mcp-code-execution-mode workflow\n# name: "f"\n#\nimport os\nos.system("x")\n',
            "exactly one",
        ),
        (
            '# mcp-code-execution-mode workflow\n# name: "f"\n# description: 3\n#\n'
            "def f():\n    pass\n",
            "not a string",
        ),
        (
            '# mcp-code-execution-mode workflow\n# name: "f"\n#\ndef f():\n    return "'
            + "x" * 70_000
            + '"\n',
            "bytes",
        ),
    ],
)
def test_a_bad_file_is_refused_naming_the_file_and_the_reason(
    store: WorkflowStore, tmp_path: Path, text: str, reason: str
) -> None:
    directory = tmp_path / "in"
    directory.mkdir()
    (directory / "bad.py").write_text(text)
    (directory / "good.py").write_text(
        '# mcp-code-execution-mode workflow\n# name: "good"\n#\n' + SOURCE.replace("greet", "good")
    )
    outcome = import_workflows(store, None, directory)
    assert outcome.refused == 1
    (line,) = [line for line in outcome.lines if line.startswith("bad.py: refused: ")]
    assert reason in line
    assert [w.name for w in store.latest(None)] == ["good"]


def test_a_header_cannot_forge_a_second_key_or_code(store: WorkflowStore, tmp_path: Path) -> None:
    store.save(None, "greet", SOURCE, 'x"\n# name: "evil"\n#\nimport os\n')
    (exported,) = export_workflows(store, None, tmp_path / "out")
    assert exported.read_text().count("\n# name: ") == 1
    import_workflows(store, "principal:y", tmp_path / "out")
    (imported,) = store.latest("principal:y")
    assert (imported.name, imported.source) == ("greet", SOURCE)


def test_a_fifo_or_a_symlink_among_the_files_is_refused_without_being_opened_through(
    store: WorkflowStore, tmp_path: Path
) -> None:
    # Decided on the file opened, not on a check before it: a name swapped for a FIFO after a
    # check would block the import, and a link leads wherever its maker chose.
    directory = tmp_path / "in"
    directory.mkdir()
    os.mkfifo(directory / "fifo.py")
    target = tmp_path / "elsewhere.py"
    target.write_text('# mcp-code-execution-mode workflow\n# name: "linked"\n#\n' + SOURCE)
    (directory / "linked.py").symlink_to(target)
    outcome = import_workflows(store, None, directory)
    assert outcome.refused == 2
    assert any(line.startswith("fifo.py: refused: not a regular file") for line in outcome.lines)
    assert any(line.startswith("linked.py: refused: a symbolic link") for line in outcome.lines)
    assert store.latest(None) == []
