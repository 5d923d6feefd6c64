"""The attack pass on workflows, checkpoints and saved references to bridge objects, through the
real bridge (the official MCP SDK client over stdio), real podman and the real CLI.

* ``workflows export DIR`` into a folder someone else prepared: a symlink named like a file it
  writes is replaced, never written through (before: it overwrote the symlink's target, e.g. a
  shell profile, with the workflow's text), and a FIFO there does not hang it;
* sandbox code that fills its 4 MiB of workflows with the slowest source to parse cannot make
  each ``list_workflows`` and search cost the host that parse again (before: 25 s of the
  bridge's CPU per listing, in a worker thread shared by every client);
* ``workflows import`` of a file whose header names a key twice is refused: the name a
  reviewer reads first is the one it would be saved under (before: the second silently won).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import bridge_env, bridge_pids, code_text, open_bridge

pytestmark = pytest.mark.container


def _cli(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m mcp_code_execution_mode workflows ...`` for the bridge state in ``state``."""
    return subprocess.run(
        [sys.executable, "-m", "mcp_code_execution_mode", "workflows", *args,
         "--state-dir", str(state)],
        capture_output=True, text=True, timeout=60, check=False, env=bridge_env(),
    )  # fmt: skip


SAVE_TWO_VERSIONS = '''
from mcp import runtime

def report(month: str) -> str:
    """Summarise a month."""
    return f"report {month}"

print(runtime.save_workflow(report), runtime.save_workflow(report))
'''


async def test_export_replaces_a_symlink_or_fifo_in_its_folder_and_never_writes_through_it(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        saved = await bridge.run(SAVE_TWO_VERSIONS)
        assert code_text(saved).strip() == (
            "{'name': 'report', 'version': 1} {'name': 'report', 'version': 2}"
        ), saved
    shared = tmp_path / "shared"
    shared.mkdir()
    victim = tmp_path / "profile"
    victim.write_text("precious\n")
    (shared / "report.v1.py").symlink_to(victim)
    os.mkfifo(shared / "report.v2.py")
    try:
        done = _cli(bridge.state_dir, "export", str(shared))
    except subprocess.TimeoutExpired:
        pytest.fail("export hung opening a FIFO named like the file it writes")
    assert done.returncode == 0, done.stderr
    assert victim.read_text() == "precious\n"
    for name in ("report.v1.py", "report.v2.py"):
        path = shared / name
        assert not path.is_symlink(), name
        assert path.is_file(), name
        assert path.read_text().startswith("# mcp-code-execution-mode workflow\n")


def _cpu_seconds(pid: int) -> float:
    """User and system CPU time of process ``pid`` (all its threads) so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# One function of about 56 KiB that takes the host's parser about 0.2 s: 74 versions of it fill
# one principal's 4 MiB.
SLOW = "def slow(a):\n    return " + "f'{a}' " * 8000 + "\n"
FILL = (
    SLOW
    + """
from mcp import runtime
saved = 0
for i in range(100):
    try:
        runtime.save_workflow(slow, name=f"slow_{i}", description="A slow report")
    except Exception as exc:
        print(type(exc).__name__, str(exc)[:60])
        break
    saved += 1
print("saved", saved)
"""
)
LIST_AND_SEARCH = """
from mcp import runtime
for _ in range(3):
    found = len(runtime.list_workflows()), len(runtime.search_workflows("slow report", limit=50))
print(*found)
"""


async def test_listing_and_searching_workflows_never_parses_their_sources_again(
    tmp_path: Path, sandbox_image: str
) -> None:
    async with open_bridge(tmp_path) as bridge:
        filled = await bridge.run(FILL)
        lines = code_text(filled).splitlines()
        assert lines[-1].startswith("saved "), filled
        count = int(lines[-1].split()[1])
        assert count > 60, filled
        (pid,) = bridge_pids(bridge.state_dir)
        before = _cpu_seconds(pid)
        listed = await bridge.run(LIST_AND_SEARCH)
        assert code_text(listed).strip() == f"{count} {min(count, 50)}", listed
        spent = _cpu_seconds(pid) - before
    # Parsing every version again cost about 11 s of CPU per listing and search (35 s for the
    # three); reading the facts kept at the save costs a fraction of a second.
    assert spent < 10, f"three listings and searches cost the bridge {spent:.1f} s of CPU"


def test_an_imported_header_that_repeats_a_key_is_refused_not_saved_under_the_second(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "meeting_times.v1.py").write_text(
        "# mcp-code-execution-mode workflow\n"
        '# name: "meeting_times"\n'
        '# description: "Meeting time in several cities"\n'
        '# name: "deploy_everything"\n'
        "#\n"
        "def meeting_times(when: str) -> str:\n"
        "    return when\n"
    )
    done = _cli(tmp_path / "state", "import", str(folder))
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        "meeting_times.v1.py: refused: header line 4 repeats the key name"
    ], done.stdout
    listed = _cli(tmp_path / "state", "export", str(tmp_path / "out"))
    assert listed.stdout == "", listed.stdout
