import os
import stat
from pathlib import Path

import pytest
from bridge_core.private_files import UnsafeDirectory, make_dirs, private_dir, write_private


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_missing_directory_and_its_missing_parents_are_created_0700(tmp_path: Path) -> None:
    old = os.umask(0)  # the most permissive umask must not matter
    try:
        private_dir(tmp_path / "a" / "b" / "c")
    finally:
        os.umask(old)
    for path in (tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "c"):
        assert _mode(path) == 0o700, path


def test_an_existing_open_directory_of_ours_is_tightened(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o2775)
    private_dir(state)
    assert _mode(state) == 0o700


def test_a_directory_of_another_account_is_refused_and_left_alone(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to make a directory owned by another uid")
    foreign = tmp_path / "foreign"
    foreign.mkdir(mode=0o777)
    foreign.chmod(0o777)
    os.chown(foreign, 12345, 12345)
    with pytest.raises(UnsafeDirectory, match="belongs to uid 12345"):
        private_dir(foreign)
    assert _mode(foreign) == 0o777


def test_a_shared_sticky_directory_like_tmp_is_refused_and_left_alone(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    with pytest.raises(UnsafeDirectory, match="shared directory") as caught:
        private_dir(shared)
    assert isinstance(caught.value, PermissionError)  # callers treating disk errors as soft
    assert _mode(shared) == 0o1777


def test_a_file_where_a_directory_should_be_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(UnsafeDirectory, match="not a directory"):
        private_dir(tmp_path / "file")


def test_make_dirs_leaves_existing_directories_of_the_user_as_they_are(tmp_path: Path) -> None:
    shared = tmp_path / "logs"
    shared.mkdir()
    shared.chmod(0o755)
    make_dirs(shared / "bridge")
    assert _mode(shared) == 0o755
    assert _mode(shared / "bridge") == 0o700


def test_write_private_replaces_an_old_world_readable_file_with_a_0600_one(tmp_path: Path) -> None:
    target = tmp_path / "profile.json"
    target.write_text("old")
    target.chmod(0o644)
    write_private(target, b"new")
    assert target.read_bytes() == b"new"
    assert _mode(target) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["profile.json"]  # no temp file left
