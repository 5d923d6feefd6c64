"""Removing a docker sandbox against a scripted ``docker`` CLI: the daemon's refusals are real
messages (docker 20.10), the order of answers is the race being tested."""

from __future__ import annotations

import os
import stat
import textwrap
from pathlib import Path
from types import SimpleNamespace

import anyio
import pytest
from bridge_core.runtime import _docker_cli
from bridge_core.runtime._docker_cli import CommandRefused, DockerCLI
from bridge_core.runtime.docker import DockerBackend

pytestmark = pytest.mark.anyio

RACED = (
    "Error response from daemon: Could not kill running container {name}, cannot remove - "
    "Container {name} is not running"
)
GONE = "Error response from daemon: No such container: {name}"
IN_PROGRESS = "Error response from daemon: removal of container {name} is already in progress"


def scripted_docker(
    tmp_path: Path, answers: list[tuple[int, str]], stdout: dict[int, str] | None = None
) -> tuple[DockerCLI, Path]:
    """A ``docker`` that gives ``answers`` (exit code, stderr) in turn, then succeeds; the
    answer of turn ``n`` prints ``stdout[n]``; every command line it got is appended to the
    returned log."""
    log = tmp_path / "calls"
    turns = tmp_path / "turns"
    for index, (code, stderr) in enumerate(answers):
        (tmp_path / f"answer{index}").write_text(f"{code}\n{stderr}")
    for index, out in (stdout or {}).items():
        (tmp_path / f"out{index}").write_text(out)
    binary = tmp_path / "docker"
    binary.write_text(
        textwrap.dedent(
            f"""\
            #!/bin/sh
            echo "$*" >> {log}
            turn=$(cat {turns} 2>/dev/null || echo 0)
            echo $((turn + 1)) > {turns}
            answer={tmp_path}/answer$turn
            [ -f {tmp_path}/out$turn ] && cat {tmp_path}/out$turn
            [ -f "$answer" ] || exit 0
            code=$(head -n 1 "$answer")
            tail -n +2 "$answer" >&2
            exit "$code"
            """
        )
    )
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    return DockerCLI(os.fspath(binary)), log


async def test_a_sandbox_that_exits_as_it_is_killed_is_removed_again(tmp_path: Path) -> None:
    cli, log = scripted_docker(tmp_path, [(1, RACED.format(name="box"))] * 2)
    await cli.remove("box")
    assert log.read_text().splitlines() == ["rm --force box"] * 3


async def test_removal_ends_when_the_raced_container_was_auto_removed(tmp_path: Path) -> None:
    cli, log = scripted_docker(
        tmp_path, [(1, RACED.format(name="box")), (1, GONE.format(name="box"))]
    )
    await cli.remove("box")
    assert log.read_text().splitlines() == ["rm --force box"] * 2


async def test_any_other_refusal_is_raised_once(tmp_path: Path) -> None:
    cli, log = scripted_docker(tmp_path, [(1, "Error response from daemon: permission denied")])
    with pytest.raises(CommandRefused, match="permission denied"):
        await cli.remove("box")
    assert log.read_text().splitlines() == ["rm --force box"]


async def test_shutdown_removes_again_a_sandbox_of_a_batch_that_exited_as_it_was_killed(
    tmp_path: Path,
) -> None:
    cli, log = scripted_docker(
        tmp_path,
        [(1, GONE.format(name="gone") + "\n" + RACED.format(name="raced")), (0, "")],
        stdout={1: "raced\nsomeone-else\n"},
    )
    backend = DockerBackend(cli, state_dir=tmp_path / "state")
    await backend.kill_all(_sandboxes("gone", "raced"))
    calls = log.read_text().splitlines()
    assert calls[0] == "rm --force gone raced"
    assert calls[1].startswith("ps --all")  # which are still there
    assert calls[2:] == ["rm --force raced"]


async def test_shutdown_waits_for_an_auto_removal_under_way_the_daemon_answered_at_once(
    tmp_path: Path,
) -> None:
    # docker answers `rm` at once when the container's auto-removal is under way (the sandbox
    # exited as its channel closed): the container is still there, and the bridge would exit
    # with it listed.
    cli, log = scripted_docker(
        tmp_path,
        [
            (1, IN_PROGRESS.format(name="leaving")),
            (0, ""),  # ps: still listed
            (1, IN_PROGRESS.format(name="leaving")),
            (0, ""),  # inspect: still there
            (1, "Error: No such object: leaving"),  # inspect: gone
        ],
        stdout={1: "leaving\n", 3: '[{"Name": "leaving"}]'},
    )
    backend = DockerBackend(cli, state_dir=tmp_path / "state")
    with anyio.fail_after(10):
        await backend.kill_all(_sandboxes("gone", "leaving"))
    calls = log.read_text().splitlines()
    assert calls[0] == "rm --force gone leaving"
    assert calls[2:] == [
        "rm --force leaving",
        "container inspect leaving",
        "container inspect leaving",
    ]


def _sandboxes(*names: str) -> list[SimpleNamespace]:
    """Stand-ins for kill_all: only ``name`` and ``stream`` are used."""
    sandboxes = []
    for name in names:
        send, receive = anyio.create_memory_object_stream[bytes]()
        receive.close()
        sandboxes.append(SimpleNamespace(name=name, stream=send))
    return sandboxes


async def test_a_container_the_daemon_never_lets_go_is_given_up_on_with_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_docker_cli, "REMOVAL_WAIT", 0.5)
    cli, log = scripted_docker(tmp_path, [(1, RACED.format(name="box"))] * 1000)
    with anyio.fail_after(5), pytest.raises(CommandRefused, match=r"still there 0\.5 s after"):
        await cli.remove("box")
    assert len(log.read_text().splitlines()) > 1
