import os
import subprocess
from pathlib import Path

import pytest
from bridge_image._inputs import (
    DEFAULT_EPOCH,
    build_epoch,
    find_repo,
    hash_files,
    hash_tree,
    source_revision,
)
from bridge_image.errors import MissingInput


def _tree(root: Path) -> Path:
    (root / "src/pkg").mkdir(parents=True)
    (root / "src/pkg/mod.py").write_text("x = 1\n")
    (root / "images/sandbox").mkdir(parents=True)
    (root / "images/sandbox/Containerfile").write_text("FROM scratch\n")
    return root


def test_tree_hash_changes_with_content_new_files_and_exec_bits(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    first = hash_tree(root, ["src", "images/sandbox"])
    assert hash_tree(root, ["images/sandbox", "src"]) == first

    (root / "src/pkg/mod.py").write_text("x = 2\n")
    second = hash_tree(root, ["src", "images/sandbox"])
    assert second != first

    (root / "src/pkg/new.py").write_text("")
    third = hash_tree(root, ["src", "images/sandbox"])
    assert third != second

    os.chmod(root / "src/pkg/new.py", 0o755)
    assert hash_tree(root, ["src", "images/sandbox"]) != third


def test_tree_hash_ignores_bytecode_caches(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    before = hash_tree(root, ["src"])
    (root / "src/pkg/__pycache__").mkdir()
    (root / "src/pkg/__pycache__/mod.cpython-311.pyc").write_bytes(b"\0")
    (root / "src/pkg/stray.pyc").write_bytes(b"\0")
    assert hash_tree(root, ["src"]) == before


def test_file_hash_does_not_depend_on_order_or_directory(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for folder in ("a", "b"):
        (tmp_path / folder / "x.whl").write_bytes(b"x")
        (tmp_path / folder / "y.whl").write_bytes(b"y")
    a = [tmp_path / "a/x.whl", tmp_path / "a/y.whl"]
    b = [tmp_path / "b/y.whl", tmp_path / "b/x.whl"]
    assert hash_files(a) == hash_files(b)
    (tmp_path / "b/y.whl").write_bytes(b"changed")
    assert hash_files(a) != hash_files(b)


def test_find_repo_walks_up_to_the_base_containerfile(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    assert find_repo(root / "src/pkg") == root


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(root), *args],
        capture_output=True,
        text=True,
        check=True,
        env={
            **os.environ,
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
        },
    )
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = _tree(tmp_path)
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2024-03-01T00:00:00Z")
    _git(root, "commit", "-q", "-m", "inputs")
    (root / "unrelated.txt").write_text("later\n")
    _git(root, "add", "unrelated.txt")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2024-06-01T00:00:00Z")
    _git(root, "commit", "-q", "-m", "unrelated")
    return root


def test_revision_is_the_last_commit_of_the_inputs_not_head(repo: Path) -> None:
    assert source_revision(repo, ["src"]) == _git(repo, "rev-parse", "HEAD~1")


def test_uncommitted_input_changes_mark_the_revision_dirty(repo: Path) -> None:
    (repo / "src/pkg/mod.py").write_text("x = 3\n")
    assert source_revision(repo, ["src"]).endswith("+dirty")
    assert not source_revision(repo, ["images"]).endswith("+dirty")


def test_outside_git_the_revision_is_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    root = _tree(tmp_path / "plain")
    assert source_revision(root, ["src"]) == "unknown"


def test_the_build_timestamp_is_fixed_unless_source_date_epoch_is_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    assert build_epoch() == DEFAULT_EPOCH
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1234")
    assert build_epoch() == 1234
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    with pytest.raises(MissingInput, match="SOURCE_DATE_EPOCH"):
        build_epoch()
