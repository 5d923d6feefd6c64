import os
from pathlib import Path

import pytest
from bridge_core.runtime._peer import (
    PeerCredentials,
    container_peer_problem,
    process_peer_problem,
)

CONTAINER_PID = 4000


def _process(proc: Path, pid: int, *, euid: int, pid_ns: str | None) -> None:
    """A fake /proc/<pid> with a status file and, if given, its pid namespace link."""
    entry = proc / str(pid)
    (entry / "ns").mkdir(parents=True)
    (entry / "status").write_text(
        f"Name:\tpython3\nPid:\t{pid}\nUid:\t{euid}\t{euid}\t{euid}\t{euid}\n", encoding="ascii"
    )
    if pid_ns is not None:
        (entry / "ns" / "pid").symlink_to(pid_ns)


@pytest.fixture
def proc(tmp_path: Path) -> Path:
    proc = tmp_path / "proc"
    _process(proc, CONTAINER_PID, euid=65534, pid_ns="pid:[4026532180]")
    return proc


def test_a_process_of_the_container_is_the_sandbox(proc: Path) -> None:
    _process(proc, 4002, euid=65534, pid_ns="pid:[4026532180]")
    peer = PeerCredentials(4002, 65534, 65534)
    assert container_peer_problem(peer, CONTAINER_PID, proc=proc) is None


def test_a_host_process_of_another_uid_is_refused_by_uid(proc: Path) -> None:
    _process(proc, 500, euid=1000, pid_ns="pid:[4026531836]")
    problem = container_peer_problem(PeerCredentials(500, 1000, 1000), CONTAINER_PID, proc=proc)
    assert problem == "it runs as uid 1000, the sandbox as uid 65534"


def test_a_host_process_with_the_sandbox_uid_is_refused_by_its_pid_namespace(proc: Path) -> None:
    _process(proc, 501, euid=65534, pid_ns="pid:[4026531836]")
    problem = container_peer_problem(PeerCredentials(501, 65534, 65534), CONTAINER_PID, proc=proc)
    assert problem is not None
    assert "another pid namespace" in problem


def test_a_peer_that_exited_or_has_no_pid_is_refused(proc: Path) -> None:
    assert container_peer_problem(PeerCredentials(777, 65534, 65534), CONTAINER_PID, proc=proc)
    assert container_peer_problem(PeerCredentials(0, 65534, 65534), CONTAINER_PID, proc=proc)


def test_a_container_the_runtime_gives_no_process_for_refuses_everyone(proc: Path) -> None:
    _process(proc, 4002, euid=65534, pid_ns="pid:[4026532180]")
    peer = PeerCredentials(4002, 65534, 65534)
    assert container_peer_problem(peer, 0, proc=proc) is not None
    assert container_peer_problem(peer, 9999, proc=proc) is not None


def test_the_real_proc_of_this_process_matches_itself() -> None:
    me = PeerCredentials(os.getpid(), os.geteuid(), os.getegid())
    assert container_peer_problem(me, os.getpid()) is None


def test_a_local_sandbox_must_be_the_spawned_process_of_this_user() -> None:
    me = PeerCredentials(os.getpid(), os.geteuid(), os.getegid())
    assert process_peer_problem(me, os.getpid()) is None
    assert process_peer_problem(me, os.getpid() + 1) is not None
    other_uid = PeerCredentials(os.getpid(), os.geteuid() + 1, os.getegid())
    assert process_peer_problem(other_uid, os.getpid()) is not None
