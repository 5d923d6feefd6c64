import os
import subprocess
from pathlib import Path

from bridge_core.runtime._oom import (
    _REMOVE_EMPTY_SCRIPT,
    cgroup_parent,
    oom_killed,
    remove_cgroup_parent,
    remove_empty_parents,
)

LIMIT = 64 * 1024 * 1024


def _v1(root: Path, name: str, peak: int) -> None:
    parent = root / "memory" / cgroup_parent(name).lstrip("/")
    parent.mkdir(parents=True)
    (parent / "memory.max_usage_in_bytes").write_text(f"{peak}\n")


def _v2(root: Path, name: str, oom_kills: int) -> None:
    parent = root / cgroup_parent(name).lstrip("/")
    parent.mkdir(parents=True)
    (parent / "memory.events").write_text(f"low 0\nhigh 0\nmax 9\noom 1\noom_kill {oom_kills}\n")


def test_cgroup_v2_oom_kill_count_decides(tmp_path: Path) -> None:
    _v2(tmp_path, "a", 1)
    _v2(tmp_path, "b", 0)
    assert oom_killed("a", memory_limit=LIMIT, exit_code=137, root=tmp_path)
    assert not oom_killed("b", memory_limit=LIMIT, exit_code=137, root=tmp_path)


def test_cgroup_v1_needs_a_sigkill_exit_and_peak_usage_at_the_limit(tmp_path: Path) -> None:
    _v1(tmp_path, "full", LIMIT + 4096)
    _v1(tmp_path, "roomy", LIMIT // 2)
    assert oom_killed("full", memory_limit=LIMIT, exit_code=137, root=tmp_path)
    assert not oom_killed("full", memory_limit=LIMIT, exit_code=1, root=tmp_path)
    assert not oom_killed("roomy", memory_limit=LIMIT, exit_code=137, root=tmp_path)


def test_no_cgroup_parent_means_no_oom_evidence(tmp_path: Path) -> None:
    assert not oom_killed("absent", memory_limit=LIMIT, exit_code=137, root=tmp_path)


def test_parents_are_removed_in_every_hierarchy_innermost_first(tmp_path: Path) -> None:
    for hierarchy in ("memory", "pids", "cpu"):
        (tmp_path / hierarchy / "mcp-bridge" / "box" / "conmon").mkdir(parents=True)
    (tmp_path / "mcp-bridge" / "box").mkdir(parents=True)
    (tmp_path / "memory" / "mcp-bridge" / "other").mkdir(parents=True)
    remove_cgroup_parent("box", root=tmp_path)
    assert not list(tmp_path.glob("**/box"))
    assert (tmp_path / "memory" / "mcp-bridge" / "other").is_dir()


def test_empty_parents_of_any_sandbox_are_swept_and_busy_ones_kept(tmp_path: Path) -> None:
    (tmp_path / "memory" / "mcp-bridge" / "gone" / "conmon").mkdir(parents=True)
    busy = tmp_path / "memory" / "mcp-bridge" / "busy"
    busy.mkdir(parents=True)
    (busy / "tasks").write_text("123\n")  # a real cgroup with a process refuses rmdir like this
    remove_empty_parents(root=tmp_path)
    assert not (tmp_path / "memory" / "mcp-bridge" / "gone").exists()
    assert busy.is_dir()


def test_a_running_bridges_empty_parents_are_left_to_it(tmp_path: Path) -> None:
    # The parent of a sandbox that just died holds its OOM evidence until its bridge read it.
    mine = f"mcp-bridge-mcp-sandbox-{os.getpid()}-03c844-1-526963f4"
    gone = "mcp-bridge-mcp-sandbox-999999999-03c844-1-526963f4"
    for name in (mine, gone):
        (tmp_path / "memory" / "mcp-bridge" / name).mkdir(parents=True)
    remove_empty_parents(root=tmp_path)
    assert (tmp_path / "memory" / "mcp-bridge" / mine).is_dir()
    assert not (tmp_path / "memory" / "mcp-bridge" / gone).exists()


def test_the_engine_machines_sweep_leaves_a_running_bridges_parents_too(tmp_path: Path) -> None:
    # A bridge reaching this engine over ssh swept every empty parent on it, also that of a
    # local bridge's sandbox that had just died: its OOM kill was reported as a plain exit 137
    # (a CI run, docker beside a remote podman on one machine).
    mine = f"mcp-bridge-mcp-sandbox-{os.getpid()}-03c844-1-526963f4"
    gone = "mcp-bridge-mcp-sandbox-999999999-03c844-1-526963f4"
    for hierarchy in (tmp_path, tmp_path / "memory"):
        for name in (mine, gone, "unnamed"):
            (hierarchy / "mcp-bridge" / name / "inner").mkdir(parents=True)
    subprocess.run(["sh", "-c", _REMOVE_EMPTY_SCRIPT, "sh", str(tmp_path), "/proc"], check=True)
    for hierarchy in (tmp_path, tmp_path / "memory"):
        assert (hierarchy / "mcp-bridge" / mine / "inner").is_dir()
        assert not (hierarchy / "mcp-bridge" / gone).exists()
        assert not (hierarchy / "mcp-bridge" / "unnamed").exists()
