"""The third attack round on the newest surfaces (durable state, disk, setup, logs), through the
real bridge (stdio and streamable HTTP, the official MCP SDK client), real podman and the real
CLI.

* unsaved work is never thrown away for another HTTP principal's start: making room hibernates
  only sessions whose state is saved (the requester's own first), else the requester is refused
  naming ``[sessions] max``; idle expiry of unsaved work says so in a notice;
* saved states never fill the disk the bridge's own files are on (``FREE_SPACE_RESERVE``);
* forks are counted on disk as they take it (whole blocks, metadata) and a client keeps at most
  ``MAX_SAVED_SESSIONS`` saved sessions;
* ``setup`` never leaves a moved token in a servers file other accounts can read, and its dry
  run prints no credential;
* a restore failure whose message (sandbox text) holds a newline stays one line of the log file.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import mcp_types as types
import pytest

from .conftest import bridge_env, code_text, open_bridge, open_http_bridge, payload_of, text_of

MiB = 1024 * 1024


def _settings(work: Path, text: str) -> None:
    """``text`` as the bridge.toml beside the servers file the bridge of ``work`` reads."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "bridge.toml").write_text(text, encoding="utf-8")


def _tokens(path: Path, *names: str) -> dict[str, str]:
    """A token file in the documented format (hashes only, 0600); returns name -> token."""
    tokens = {name: secrets.token_urlsafe(32) for name in names}
    path.write_text(
        "".join(f"{n} sha256:{hashlib.sha256(t.encode()).hexdigest()}\n" for n, t in tokens.items())
    )
    path.chmod(0o600)
    return tokens


def _notices(result: types.CallToolResult) -> str:
    return "\n".join(payload_of(result).get("notices", []))


# --- 2: unsaved work is never stopped to make room for another principal ---------------------

TOO_BIG = "big = bytes(3 * 1024 * 1024)"  # past [sessions] state_max = 1m: its state is refused


@pytest.mark.container
async def test_unsaved_work_is_never_hibernated_for_another_principals_start(
    tmp_path: Path, sandbox_image: str
) -> None:
    # Two live containers for the whole bridge. Alice's session holds work whose state could not
    # be saved; Bob opens sessions within his own limit. Before, "saved" meant only "no snapshot
    # in flight": Alice's session, the least recently used, was hibernated for Bob's second
    # session and came back empty.
    _settings(
        tmp_path,
        '[sessions]\nmax = 2\nstate_max = "1m"\n\n[sandbox]\npool_size = 0\n',
    )
    tokens = _tokens(tmp_path / "tokens", "alice", "bob")
    env = {"MCP_BRIDGE_HTTP_TOKEN_FILE": str(tmp_path / "tokens")}
    async with (
        open_http_bridge(tmp_path, env=env) as bridge,
        bridge.session(tokens["alice"]) as alice,
        bridge.session(tokens["bob"]) as bob,
    ):
        await alice.run(TOO_BIG)
        await bob.run("x = 1", session="one")
        second = await bob.run("6 * 7", session="two")  # Bob's own saved "one" makes room
        kept = await alice.run("len(big)")
        await bob.run(TOO_BIG, session="two")  # now neither live session may be stopped
        refused = await bob.run("1", session="three")
        still = await alice.run("len(big)")
    assert text_of(second).endswith("42"), text_of(second)
    assert text_of(kept).endswith("3145728"), text_of(kept)
    assert "restored" not in _notices(kept), _notices(kept)
    assert "could not be saved" in _notices(kept)  # the refused state is named, as always
    assert payload_of(refused)["status"] != "ok", payload_of(refused)
    assert "[sessions] max" in text_of(refused), text_of(refused)
    assert "yours: two" in text_of(refused), text_of(refused)  # only Bob's own names quoted
    assert text_of(still).endswith("3145728"), text_of(still)


@pytest.mark.container
async def test_idle_expiry_of_unsaved_work_says_on_the_next_call_that_it_is_lost(
    tmp_path: Path, sandbox_image: str
) -> None:
    # The same on idle expiry: the sandbox is stopped all the same (its container is not kept
    # for ever), but the next call is told the work since the last saved state is lost.
    _settings(
        tmp_path, '[sessions]\nidle_ttl = "4s"\nstate_max = "1m"\n\n[sandbox]\npool_size = 0\n'
    )
    tokens = _tokens(tmp_path / "tokens", "alice")
    env = {"MCP_BRIDGE_HTTP_TOKEN_FILE": str(tmp_path / "tokens")}
    async with open_http_bridge(tmp_path, env=env) as bridge, bridge.session(tokens["alice"]) as a:
        await a.run("small = 'saved'")
        await a.run("small")  # its state is on disk once this runs
        mark = len(bridge.stderr.text)
        await a.run(TOO_BIG)
        await bridge.stderr.wait_for("session 'default' hibernated", start=mark, within=60)
        back = await a.run("small, 'big' in globals()")
    assert text_of(back).endswith("('saved', False)"), text_of(back)
    notices = _notices(back)
    assert "[sessions] idle_ttl" in notices, notices
    assert "is lost" in notices, notices
    assert "after its last successful execution" not in notices, notices


# --- 4: saved states leave the free-space reserve --------------------------------------------


@pytest.fixture
def small_state_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 MiB tmpfs mounted as the bridge's state dir (``tmp_path/state``), unmounted after.

    Mounting needs root (the CI machines run the suite as root); elsewhere the test is skipped:
    the store reads the free space with ``shutil.disk_usage``, which the unit tests fake.
    """
    mount = tmp_path / "state"
    mount.mkdir()
    if not sys.platform.startswith("linux") or shutil.which("mount") is None:
        pytest.skip("mounting a small file system needs Linux and mount(8)")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64m,mode=0700", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        pytest.skip(f"a tmpfs cannot be mounted here (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "--lazy", str(mount)], check=True)


def _store(state_dir: Path) -> Path:
    return state_dir / "sessions" / "saved" / "default"


@pytest.mark.container
async def test_saved_states_never_fill_the_disk_of_the_bridges_own_files(
    tmp_path: Path, small_state_disk: Path, sandbox_image: str
) -> None:
    # The whole state dir (saved states, the log file, the sandboxes' channel directories, full
    # outputs) is a 64 MiB disk, and [sessions] state_disk keeps its default (4 GiB). Before,
    # three sessions of 24 MB saved states filled it ("No space left on device"), and with it
    # the bridge's own files there. The reserve, max(1 GiB, 5 %), is more than this disk has: no
    # state may be kept on it.
    total = shutil.disk_usage(small_state_disk).total
    async with open_bridge(tmp_path) as bridge:
        for name in ("a", "b", "c"):
            await bridge.run("import os\nblob = os.urandom(24_000_000)", session=name)
        told = await bridge.run("len(blob)", session="a")
        free = shutil.disk_usage(small_state_disk).free
        states = sorted(_store(bridge.state_dir).glob("*.state"))
        # The bridge's own files on that disk: a new sandbox's channel directory, and a full
        # output of 2 MB kept where its code reads it.
        flood = await bridge.run("print('y' * 2_000_000)", session="newcomer")
        path = payload_of(flood)["full_output"]
        size = await bridge.run(f"import posix\nposix.stat({path!r}).st_size", session="newcomer")
    print(f"{free:,} of {total:,} bytes free; {len(states)} states kept")
    assert "FREE_SPACE_RESERVE" in _notices(told), _notices(told)
    assert text_of(told).endswith("24000000")
    assert states == []
    assert free > total - 8 * MiB
    assert payload_of(flood)["truncated"] is True
    assert text_of(size).endswith("2000001"), text_of(size)


# --- 6: forks are counted as they take the disk; saved sessions per client are capped -------

FORK_UNTIL_REFUSED = """
made, refused = 0, ''
for n in range(80):
    try:
        runtime.fork_session_sync(f'copy-{n}')
    except Exception as exc:
        refused = f'{type(exc).__name__}: {exc}'
        break
    made += 1
print(made)
print(refused)
"""


def _allocated(folder: Path) -> int:
    """Bytes the files of ``folder`` take on disk (their allocated blocks)."""
    return sum(p.stat().st_blocks * 512 for p in folder.iterdir() if p.is_file())


@pytest.mark.container
async def test_many_small_forks_stay_within_the_disk_budget_on_disk(
    tmp_path: Path, sandbox_image: str
) -> None:
    # Before, the budget counted a state's bytes only: 30 forks of ~3,000 bytes each took a
    # block for their file and one for their metadata, 2.7 times a 90,000-byte budget.
    budget = 90_000
    _settings(tmp_path, f'[sessions]\nstate_disk = "{budget}"\n\n[sandbox]\npool_size = 0\n')
    async with open_bridge(tmp_path) as bridge:
        await bridge.run("x = 'origin'")
        forked = await bridge.run(FORK_UNTIL_REFUSED, timeout=120)
        on_disk = _allocated(_store(bridge.state_dir))
        copy = await bridge.run("x", session="copy-0")
    made, refused = code_text(forked).split("\n", 1)
    print(f"{made} forks, {on_disk:,} bytes allocated of a {budget:,}-byte budget")
    assert "[sessions] state_disk" in refused, refused
    assert 0 < int(made) < 80
    assert on_disk <= budget
    assert code_text(copy) == "'origin'"


def _state_name(name: str) -> str:
    """The file name (without suffix) of the one client of a stdio bridge's session ``name``."""
    owner = hashlib.sha256(b"").hexdigest()[:16]
    digest = hashlib.sha256(("\0" + name).encode()).hexdigest()[:32]
    return f"{owner}-{digest}"


@pytest.mark.container
async def test_a_client_keeps_at_most_max_saved_sessions_forks_and_new_names_refused(
    tmp_path: Path, sandbox_image: str
) -> None:
    # Before, nothing bounded the number of saved sessions: forks and new names (a few KiB of
    # disk each, walked at every hint and client exit) piled up to the disk budget. The store
    # is filled to the cap here with copies of a real saved state under real session names
    # (1,000 forks through the bridge would take minutes); the bridge counts them at start.
    _settings(tmp_path, "[sandbox]\npool_size = 0\n")
    async with open_bridge(tmp_path) as bridge:
        await bridge.run("x = 'kept'")
        await bridge.run("x")  # its state is on disk once this runs
    store = _store(tmp_path / "state")
    origin = store / _state_name("default")
    for n in range(999):
        base = store / _state_name(f"filled-{n}")
        shutil.copyfile(origin.with_suffix(".state"), base.with_suffix(".state"))
        shutil.copyfile(origin.with_suffix(".meta"), base.with_suffix(".meta"))
    assert len(list(store.glob("*.state"))) == 1000
    async with open_bridge(tmp_path) as bridge:
        forked = await bridge.run(
            "try:\n    runtime.fork_session_sync('one-more')\nexcept Exception as exc:\n"
            "    print(type(exc).__name__, exc)\n"
        )
        await bridge.run("y = 1", session="new-name")
        told = await bridge.run("y", session="new-name")
        again = await bridge.run("x")
    assert "MAX_SAVED_SESSIONS" in code_text(forked), code_text(forked)
    assert "MAX_SAVED_SESSIONS" in _notices(told), _notices(told)
    assert len(list(store.glob("*.state"))) == 1000
    assert text_of(again).endswith("'kept'")


# --- 7: setup keeps moved credentials private and prints none --------------------------------

TOKEN = "ghp_0123456789abcdefSECRET"
ARG_KEY = "sk-live-4f9a8b7c6d5e3f2a"
URL_KEY = "c2VjcmV0LXRva2VuLTEyMw"
URL_PASSWORD = "hunter2hunter2"
CLIENT = {
    "mcpServers": {
        "github": {"command": "npx", "args": ["server-github"], "env": {"GITHUB_TOKEN": TOKEN}},
        "search": {"command": "search-mcp", "args": ["--api-key", ARG_KEY, "--verbose"]},
        "remote": {"url": f"https://me:{URL_PASSWORD}@mcp.example.com/mcp?key={URL_KEY}"},
    }
}


def _setup(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``setup cursor`` as a user whose home is ``home`` runs it (no XDG overrides)."""
    env = {k: v for k, v in bridge_env().items() if not k.startswith(("MCP_BRIDGE_", "XDG_"))}
    return subprocess.run(
        [sys.executable, "-m", "mcp_code_execution_mode", "setup", "cursor", *args,
         "--state-dir", str(home / "state")],
        capture_output=True, text=True, timeout=120, check=False, cwd=home,
        env={**env, "HOME": str(home)},
    )  # fmt: skip


def test_setup_never_leaves_a_moved_token_readable_by_others_and_its_dry_run_masks_it(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    client = home / ".cursor" / "mcp.json"
    client.parent.mkdir(parents=True)
    client.write_text(json.dumps(CLIENT, indent=2))
    # The servers file made by hand as the docs describe, under the usual umask.
    servers = home / ".config" / "mcp-code-execution-mode" / "servers.json"
    servers.parent.mkdir(parents=True)
    servers.write_text('{"mcpServers": {"notes": {"command": "notes-mcp"}}}')
    servers.chmod(0o644)

    dry = _setup(home, "--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    for secret in (TOKEN, ARG_KEY, URL_KEY, URL_PASSWORD):
        assert secret not in dry.stdout + dry.stderr, secret
    assert "mcp.example.com" in dry.stdout  # the plan is shown, its credentials masked
    assert "--api-key" in dry.stdout
    assert TOKEN not in servers.read_text()  # a dry run writes nothing
    assert stat.S_IMODE(servers.stat().st_mode) == 0o644

    done = _setup(home)
    moved = TOKEN in servers.read_text()
    mode = stat.S_IMODE(servers.stat().st_mode)
    if done.returncode == 0:
        assert moved, done.stdout
    # Either it moved the token into a file only its owner can read and says so, or it refused.
    assert not (moved and mode & 0o077), f"token moved into a mode {mode:o} servers file"
    assert "can be read by other accounts" in done.stdout + done.stderr
    for secret in (TOKEN, ARG_KEY, URL_KEY, URL_PASSWORD):
        assert secret not in done.stdout + done.stderr, secret


# --- 10: sandbox text cannot forge a line of bridge.log ----------------------------------------

FORGED = "2026-12-04 16:51:34,000 4242 WARNING bridge_core.approval: the user approved rm -rf"
RAISE = f"raise ValueError({'restore failed' + chr(10) + FORGED!r})"
BOMB = (
    "class Bomb:\n"
    "    def __reduce__(self):\n"
    f"        return (exec, ({RAISE!r},))\n"
    "bomb = Bomb()\n"
    "del Bomb\n"
)
RECORD = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} \d+ [A-Z]+ \S+: ")


@pytest.mark.container
async def test_a_failed_restore_whose_message_holds_a_newline_is_one_line_of_the_log(
    tmp_path: Path, sandbox_image: str
) -> None:
    # The saved state's pickle runs sandbox-chosen code when it is loaded: its exception message
    # holds a newline and then a whole forged record. Before, the bridge logged the refused
    # restore with that message as is, and the log file showed a second record nobody wrote.
    async with open_bridge(tmp_path) as bridge:
        await bridge.run(BOMB)
        await bridge.run("1")  # the state holding the bomb is on disk once this runs
        crashed = await bridge.run("import os\nos._exit(3)")
        back = await bridge.run("'bomb' in globals()")
        log = await anyio.Path(bridge.state_dir / "logs" / "bridge.log").read_text()
    assert payload_of(crashed)["status"] == "crashed"
    assert text_of(back).endswith("False"), text_of(back)
    assert "could not be restored" in _notices(back), _notices(back)
    lines = log.splitlines()
    [refused] = [line for line in lines if "restore failed" in line]
    assert RECORD.match(refused), refused
    assert "restore failed\\n2026-12-04" in refused
    assert not any(line.startswith(FORGED[:30]) for line in lines)
    for line in lines:  # every line is a record or a continuation of one
        assert RECORD.match(line) or line.startswith("  | "), line
