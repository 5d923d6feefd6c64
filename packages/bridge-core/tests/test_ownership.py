import os
import subprocess
import sys
from pathlib import Path

from bridge_core._ownership import (
    Owner,
    current_owner,
    dead_owner_dirs,
    owner_dir_name,
    owner_is_alive,
    parse_owner,
    process_start_time,
)


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_owner_label_round_trips_through_parse() -> None:
    owner = current_owner()
    assert owner.pid == os.getpid()
    assert parse_owner(owner.label) == owner


def test_malformed_owner_labels_parse_to_none() -> None:
    for bad in (None, "", "12", "12:", ":34", "a:1", "1:b", "1:2:3", "-1:5"):
        assert parse_owner(bad) is None, bad


def test_start_time_is_read_after_a_command_name_with_spaces_and_parens(tmp_path: Path) -> None:
    (tmp_path / "77").mkdir()
    fields = " ".join(str(n) for n in range(3, 60))  # field k holds the number k
    (tmp_path / "77" / "stat").write_text(f"77 (evil) name (x) {fields}\n")
    assert process_start_time(77, proc=str(tmp_path)) == 22


def test_this_process_is_alive_and_a_reaped_child_is_not() -> None:
    assert owner_is_alive(current_owner())
    assert not owner_is_alive(Owner(_dead_pid(), 1))


def test_without_proc_a_live_bridge_is_told_from_a_dead_one_by_its_pid(tmp_path: Path) -> None:
    # macOS: no /proc, so labels carry start time 0; a live bridge's sandboxes (another client's
    # bridge on the same Mac) must not be taken for leftovers.
    no_proc = str(tmp_path / "no-proc")
    assert owner_is_alive(Owner(os.getpid(), 0), proc=no_proc)
    assert not owner_is_alive(Owner(_dead_pid(), 0), proc=no_proc)


def test_a_reused_pid_with_another_start_time_counts_as_dead() -> None:
    me = current_owner()
    assert not owner_is_alive(Owner(me.pid, me.start_time + 1))


def test_only_directories_of_dead_owners_are_selected(tmp_path: Path) -> None:
    live = tmp_path / owner_dir_name(current_owner())
    dead = tmp_path / owner_dir_name(Owner(_dead_pid(), 1))
    for directory in (live, dead, tmp_path / "not-an-owner", tmp_path / "12-x"):
        directory.mkdir()
    (tmp_path / owner_dir_name(Owner(_dead_pid(), 2))).write_text("a file, not a directory")
    assert dead_owner_dirs(tmp_path) == [dead]


def test_a_missing_parent_has_no_dead_owner_dirs(tmp_path: Path) -> None:
    assert dead_owner_dirs(tmp_path / "none") == []
