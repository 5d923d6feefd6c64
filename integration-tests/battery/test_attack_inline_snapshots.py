"""Sandbox code against the saving of a small state by the sandbox's own main thread (durable
sessions), through the real bridge over stdio (MCP SDK client) and real podman.

A state up to 256 KiB is pickled in the sandbox process itself right after the result, and an
unchanged one is announced without data (``same-``): user code's ``__reduce__`` and ``__str__``
now run in the process that serves the session, and the host vouches for what it committed last.
Whatever user code does while being saved, the sandbox lives on, the next call says what was not
saved, and a crash brings back the state after the last successful execution, never an older one.
"""

from __future__ import annotations

from pathlib import Path

import mcp_types as types
import pytest

from .conftest import open_bridge, payload_of, text_of

pytestmark = pytest.mark.anyio


def _notices(result: types.CallToolResult) -> str:
    return " ".join(payload_of(result).get("notices", []))


SAYS_NOTHING = """
class Mute(Exception):
    def __str__(self):
        raise Mute()  # describing it raises it again
class Unsaveable:
    def __reduce__(self):
        raise Mute()
odd = Unsaveable()
'made'
"""

EXITS_MUTELY = """
class MuteExit(SystemExit):
    def __str__(self):
        raise MuteExit()
class Quits:
    def __reduce__(self):
        raise MuteExit()
del odd
quits = Quits()
'made'
"""


async def test_an_exception_that_cannot_be_described_fails_the_save_not_the_sandbox(
    tmp_path: Path, sandbox_image: str
) -> None:
    # Before: the main thread formatted the exception of a failed save with str(), which user
    # code defines: the sandbox died between two executions and the next call "crashed".
    async with open_bridge(tmp_path) as bridge:
        await bridge.run("good = 'kept'")
        assert text_of(await bridge.run(SAYS_NOTHING)) == "'made'"
        told = await bridge.run("good, 'odd' in globals()")
        assert text_of(told) == "('kept', True)", text_of(told)
        assert "odd (Unsaveable)" in _notices(told)  # the other names are saved
        assert text_of(await bridge.run(EXITS_MUTELY)) == "'made'"
        told = await bridge.run("good, 'quits' in globals()")
        assert text_of(told) == "('kept', True)", text_of(told)
        assert "could not be saved" in _notices(told)


RAISES_ANYTHING = """
class Bye:
    def __reduce__(self):
        raise SystemExit(3)
class Stop:
    def __reduce__(self):
        raise KeyboardInterrupt
bye, stop = Bye(), Stop()
'made'
"""


async def test_a_save_that_raises_system_exit_leaves_the_sandbox_and_the_last_good_state(
    tmp_path: Path, sandbox_image: str
) -> None:
    # Pickling runs __reduce__ in the process that serves the session: SystemExit or
    # KeyboardInterrupt out of it must fail this save only.
    async with open_bridge(tmp_path) as bridge:
        await bridge.run("good = 'kept'")
        await bridge.run(RAISES_ANYTHING)
        told = await bridge.run("good, 'bye' in globals()")
        assert text_of(told) == "('kept', True)", text_of(told)
        assert "could not be saved" in _notices(told)
        await bridge.run("import os\nos._exit(1)")
        back = await bridge.run("good, 'bye' in globals()")
    assert text_of(back) == "('kept', False)"


MUTATES_WHEN_SAVED = """
class Cached:
    def __init__(self):
        self.cache = {'k': 1}
    def __getstate__(self):
        state = self.__dict__  # no copy: saving it drops the live object's cache too
        state.pop('cache', None)
        return state
c = Cached()
'made'
"""


async def test_saving_never_runs_the_sessions_pickling_code_on_its_live_objects(
    tmp_path: Path, sandbox_image: str
) -> None:
    # A __getstate__ of the session's own code ran in the sandbox process (the inline save) and
    # changed the live object after every execution; a forked child saves such a state, and
    # whatever its hooks do happens to the child's copy only, as before the inline save.
    async with open_bridge(tmp_path) as bridge:
        assert text_of(await bridge.run(MUTATES_WHEN_SAVED)) == "'made'"
        assert text_of(await bridge.run("hasattr(c, 'cache')")) == "True"
        assert text_of(await bridge.run("hasattr(c, 'cache')")) == "True"


HUGE_NAME = """
globals()["n" * 17_000_000] = (x for x in ())  # a name of 17 MB whose value cannot be pickled
other = 'saved'
'made'
"""


async def test_unsaved_names_of_any_length_still_end_the_save(
    tmp_path: Path, sandbox_image: str
) -> None:
    # Before: the list of unsaved names went whole into the frame that ends the snapshot; past
    # the channel's 16 MiB it could not be sent, the host waited for it (up to the start
    # timeout, 60 s) and the next call was told nothing: the state silently not saved.
    async with open_bridge(tmp_path) as bridge:
        await bridge.run(HUGE_NAME)
        told = await bridge.run("other")
        assert text_of(told) == "'saved'"
        notices = _notices(told)
        assert "these names could not be saved" in notices, notices
        assert len(notices) < 4096
        await bridge.run("import os\nos._exit(1)")
        back = await bridge.run("other")
    assert text_of(back) == "'saved'"


SLOW_CHILD_SAVE = """
import os, threading, time
MAIN = os.getpid()
class SlowToSaveInTheChild:
    def __reduce__(self):
        if os.getpid() != MAIN:
            time.sleep(14)  # only the forked saving child is slow: past the start timeout
        return (str, ('slow',))
slow = SlowToSaveInTheChild()
value = 'old'
# A user thread is alive: this state is saved by a forked child.
threading.Thread(target=time.sleep, args=(2,), daemon=True).start()
'made'
"""

CHILD_DONE = """
while any(t.name == 'bridge-snapshot' for t in threading.enumerate()):
    time.sleep(0.1)
'child done'
"""


async def test_a_late_child_snapshot_never_replaces_a_newer_inline_one(
    tmp_path: Path, sandbox_image: str
) -> None:
    # The host waits for a snapshot only up to the start timeout, and now says so. Before: it
    # said nothing; the next state, small and saved inline, was committed first, the slow
    # child's older state then arrived and was committed over it, and the unchanged state after
    # that was vouched for: a crash brought back the older state.
    env = {"MCP_BRIDGE_SANDBOX_START_TIMEOUT": "8s"}
    async with open_bridge(tmp_path, env=env) as bridge:
        assert text_of(await bridge.run(SLOW_CHILD_SAVE)) == "'made'"
        told = await bridge.run("del slow\nvalue = 'new'")  # runs while the child still saves
        # Told at once: a crash now would bring back an older state than the last execution's.
        assert "is still being saved" in _notices(told), _notices(told)
        await bridge.run("value")
        assert text_of(await bridge.run(CHILD_DONE, timeout=60)) == "'child done'"
        await bridge.run("value")
        await bridge.run("import os\nos._exit(1)")
        back = await bridge.run("value, 'slow' in globals()")
    assert text_of(back) == "('new', False)", text_of(back)
