"""Session manager behaviour against the in-process fake runtime (real protocol frames)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from bridge_core.errors import RuntimeUnavailable, SandboxStartError, SessionLimitExceeded
from bridge_core.runtime.base import CheckedRuntime, RuntimeBackend, SandboxSpec
from bridge_core.sessions import DEFAULT_SESSION, ExecutionResult, validate_session_name

from .conftest import FakeRuntime, FakeSandbox, Harness, settle


async def test_variables_persist_between_executions_of_a_session(harness: Harness) -> None:
    async with harness.manager() as manager:
        first = await manager.execute("set:a=41\nprint:stored")
        second = await manager.execute("get:a")
    assert first.status == "ok"
    assert first.session == DEFAULT_SESSION
    assert first.stdout == "stored\n"
    assert second.stdout == "41\n"
    assert second.notices == ()


async def test_sessions_are_isolated_from_each_other(harness: Harness) -> None:
    async with harness.manager() as manager:
        await manager.execute("set:a=1", session="one")
        other = await manager.execute("get:a", session="two")
        assert manager.session_names() == ["one", "two"]
    assert other.stdout == "<unset>\n"


async def test_two_sessions_run_in_parallel(harness: Harness) -> None:
    # "meet:x/2" only returns once two executions wait there at the same time.
    results: dict[str, ExecutionResult] = {}

    async def run(name: str) -> None:
        results[name] = await manager.execute("meet:x/2\nprint:met", session=name, timeout=10)

    async with harness.manager() as manager:
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(run, "a")
                tg.start_soon(run, "b")
    assert [results[n].stdout for n in "ab"] == ["met\n", "met\n"]


async def test_executions_in_one_session_run_one_at_a_time_in_order(harness: Harness) -> None:
    results: list[ExecutionResult] = []

    async def run(code: str) -> None:
        results.append(await manager.execute(code, timeout=10))

    async with harness.manager() as manager:
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(run, "print:first\nhold:first")
                await harness.runtime.holding("first").wait()
                # Queued one after the other: tasks started together run in no set order
                # (trio shuffles them), and the order promised is that of arrival.
                tg.start_soon(run, "print:second")
                await anyio.wait_all_tasks_blocked()
                tg.start_soon(run, "print:third")
                await anyio.wait_all_tasks_blocked()
                # While the first holds the session, nothing else reached the sandbox.
                assert harness.runtime.executions == ["print:first\nhold:first"]
                harness.runtime.release("first").set()
    assert [r.stdout for r in results] == ["first\n", "second\n", "third\n"]


async def test_waiting_for_the_turn_gives_up_at_its_own_timeout(harness: Harness) -> None:
    async with harness.manager() as manager, anyio.create_task_group() as tg:
        tg.start_soon(manager.execute, "hold:busy")
        with anyio.fail_after(5):
            await harness.runtime.holding("busy").wait()
            waiting = await manager.execute("print:never", timeout=0.2)
        harness.runtime.release("busy").set()
    assert waiting.status == "unavailable"
    assert "waiting" in waiting.notices[-1]
    assert "print:never" not in harness.runtime.executions


async def test_starting_the_sandbox_does_not_count_against_the_calls_timeout(
    harness: Harness,
) -> None:
    harness.runtime.start_gate = anyio.Event()
    results: list[ExecutionResult] = []

    async def call() -> None:
        results.append(await manager.execute("print:ran", timeout=0.2))

    async with harness.manager() as manager, anyio.create_task_group() as tg:
        tg.start_soon(call)
        with anyio.fail_after(5):
            await harness.runtime.start_begun.wait()
        await anyio.sleep(0.5)  # a cold start longer than the call's whole timeout
        harness.runtime.start_gate.set()
    assert results[0].status == "ok", results[0].notices
    assert results[0].stdout == "ran\n"
    assert results[0].sandbox_start >= 0.5  # said, and not part of the code's duration
    assert results[0].duration < results[0].sandbox_start


async def test_a_sandbox_that_cannot_start_in_time_names_the_start_timeout(
    harness: Harness,
) -> None:
    harness.runtime.start_gate = anyio.Event()  # never set: the start hangs
    async with harness.manager(start_timeout=0.3) as manager:
        with anyio.fail_after(5):
            result = await manager.execute("print:never", timeout=60)
    assert result.status == "unavailable"
    assert "[sandbox] start_timeout" in result.notices[-1]
    assert "0.3 s" in result.notices[-1]


async def test_warm_pool_serves_the_first_execution_of_a_new_session(harness: Harness) -> None:
    async with harness.manager(pool_size=1) as manager:
        with anyio.fail_after(5):
            await settle(lambda: manager.stats.pool_ready == 1)
            result = await manager.execute("print:warm", session="fresh")
            assert manager.stats.pool_hits == 1
            assert manager.stats.pool_misses == 0
            # ... and the pool refills in the background.
            await settle(lambda: manager.stats.pool_ready == 1)
    assert result.stdout == "warm\n"


async def test_pool_size_zero_starts_sandboxes_only_on_demand(harness: Harness) -> None:
    async with harness.manager(pool_size=0) as manager:
        await anyio.wait_all_tasks_blocked()
        assert harness.runtime.starts_begun == 0
        await manager.execute("print:x")
        assert manager.stats.pool_misses == 1
        assert manager.stats.sandboxes_started == 1


async def test_reset_argument_gives_a_fresh_namespace_and_says_so(harness: Harness) -> None:
    async with harness.manager() as manager:
        await manager.execute("set:a=1")
        result = await manager.execute("get:a", reset=True)
    assert result.stdout == "<unset>\n"
    assert any("reset as requested" in n for n in result.notices)


async def test_reset_method_drops_the_sandbox_and_stops_its_container(harness: Harness) -> None:
    async with harness.manager() as manager:
        await manager.execute("set:a=1", session="s")
        old = harness.runtime.only().name
        await manager.reset("s")
        result = await manager.execute("get:a", session="s")
        await settle(lambda: old in harness.runtime.stopped)
    assert result.stdout == "<unset>\n"
    assert result.notices == ()


async def test_max_sessions_error_names_the_limit_and_the_setting(harness: Harness) -> None:
    async with harness.manager(max_sessions=2) as manager:
        await manager.execute("print:1", session="a")
        await manager.execute("print:2", session="b")
        with pytest.raises(SessionLimitExceeded) as raised:
            await manager.execute("print:3", session="c")
        # An existing session still works at the limit.
        assert (await manager.execute("print:again", session="a")).ok
    assert "[sessions] max" in str(raised.value)
    assert "2" in str(raised.value)


async def test_a_session_whose_sandbox_could_not_start_takes_no_slot(harness: Harness) -> None:
    harness.runtime.start_error = SandboxStartError("no image")
    async with harness.manager(max_sessions=1) as manager:
        assert (await manager.execute("print:x", session="a")).status == "unavailable"
        harness.runtime.start_error = None
        assert manager.session_names() == []
        assert (await manager.execute("print:x", session="b")).ok


async def test_idle_session_expires_and_its_next_caller_is_told(harness: Harness) -> None:
    now = [1000.0]
    manager = harness.manager(idle_ttl=60)
    manager._clock = lambda: now[0]
    async with manager:
        await manager.execute("set:a=1", session="idle")
        name = harness.runtime.only().name
        now[0] += 30
        assert manager.expire_idle() == []
        now[0] += 31
        assert manager.expire_idle() == ["idle"]
        assert manager.session_names() == []
        await settle(lambda: name in harness.runtime.stopped)
        result = await manager.execute("get:a", session="idle")
    assert result.stdout == "<unset>\n"
    assert any("idle for more than 60 s" in n for n in result.notices)


async def test_persist_false_gives_a_fresh_sandbox_to_every_execution(harness: Harness) -> None:
    async with harness.manager(persist=False) as manager:
        await manager.execute("set:a=1")
        second = await manager.execute("get:a")
        assert manager.session_names() == []
    assert second.stdout == "<unset>\n"
    assert harness.runtime.starts_begun == 2


async def test_runtime_factory_is_lazy_and_its_failure_is_an_unavailable_result(
    harness: Harness,
) -> None:
    calls: list[int] = []

    async def factory() -> RuntimeBackend:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeUnavailable("no container runtime: install podman")
        return harness.runtime

    from bridge_core.sessions import SessionManager

    manager = SessionManager(
        harness.config(), runtime=factory, gateway=harness.gateway, state_dir=harness.state_dir
    )
    async with manager:
        assert calls == []
        failed = await manager.execute("print:x")
        retried = await manager.execute("print:x")
    assert failed.status == "unavailable"
    assert "install podman" in failed.notices[-1]
    assert retried.stdout == "x\n"
    assert harness.runtime.closed  # made by the factory, so closed by the manager


async def test_sandboxes_start_from_the_image_id_the_runtime_factory_checked(
    harness: Harness,
) -> None:
    # Issue 34: the image was checked under its name, then started by that name, so a re-tag
    # between the check and a start swapped the image that ran.
    checked = "sha256:" + "ab" * 32
    specs: list[SandboxSpec] = []
    start = harness.runtime.start

    async def recording(spec: SandboxSpec) -> FakeSandbox:
        specs.append(spec)
        return await start(spec)

    harness.runtime.start = recording  # type: ignore[method-assign]

    async def factory() -> CheckedRuntime:
        return CheckedRuntime(harness.runtime, checked)

    from bridge_core.sessions import SessionManager

    manager = SessionManager(
        harness.config(pool_size=1),
        runtime=factory,
        gateway=harness.gateway,
        state_dir=harness.state_dir,
    )
    async with manager:
        result = await manager.execute("print:x")
        await settle(lambda: len(specs) == 2)  # the warm pool's replacement too
    assert result.stdout == "x\n"
    assert [(spec.image, spec.image_id, spec.source) for spec in specs] == [
        ("fake:1", checked, checked)
    ] * 2
    assert harness.runtime.closed  # the backend inside is the factory's: closed with the manager


async def test_a_checked_backend_passed_in_starts_from_its_image_id_and_stays_open(
    harness: Harness,
) -> None:
    checked = "sha256:" + "cd" * 32
    specs: list[SandboxSpec] = []
    start = harness.runtime.start

    async def recording(spec: SandboxSpec) -> FakeSandbox:
        specs.append(spec)
        return await start(spec)

    harness.runtime.start = recording  # type: ignore[method-assign]
    from bridge_core.sessions import SessionManager

    manager = SessionManager(
        harness.config(),
        runtime=CheckedRuntime(harness.runtime, checked),
        gateway=harness.gateway,
        state_dir=harness.state_dir,
    )
    async with manager:
        await manager.execute("print:x")
    assert [spec.source for spec in specs] == [checked]
    assert not harness.runtime.closed


async def test_a_sandbox_killed_while_starting_is_replaced_once_and_the_call_answers(
    harness: Harness,
) -> None:
    # Found by the chaos run: a warm-pool sandbox killed from outside while it started failed
    # the next caller with "unavailable" although a second start would have worked.
    start = harness.runtime.start
    attempts: list[str] = []

    async def killed_once(spec: SandboxSpec) -> FakeSandbox:
        attempts.append(spec.name)
        if len(attempts) == 1:
            raise SandboxStartError(f"sandbox {spec.name} exited before connecting its channel")
        return await start(spec)

    harness.runtime.start = killed_once  # type: ignore[method-assign]
    async with harness.manager() as manager:
        result = await manager.execute("print:x")
    assert result.status == "ok"
    assert result.stdout == "x\n"
    assert len(attempts) == 2


async def test_start_failure_is_an_unavailable_result(harness: Harness) -> None:
    harness.runtime.start_error = SandboxStartError("image fake:1 not found")
    async with harness.manager() as manager:
        result = await manager.execute("print:x")
    assert result.status == "unavailable"
    assert result.error is not None
    assert "image fake:1 not found" in result.error.message


async def test_protocol_version_mismatch_is_refused_and_reported(harness: Harness) -> None:
    harness.runtime.hello_versions = (99,)
    async with harness.manager() as manager:
        result = await manager.execute("print:x")
    assert result.status == "unavailable"
    assert "speaks protocol [99]" in result.notices[-1]
    assert "NEWER than this bridge" in result.notices[-1]
    assert not harness.runtime.running


@pytest.mark.parametrize("bad", ["", "a b", "x" * 65, "../etc", "é"])
async def test_invalid_session_names_are_rejected_naming_the_pattern(
    harness: Harness, bad: str
) -> None:
    with pytest.raises(ValueError, match=r"A-Za-z0-9_\.-"):
        validate_session_name(bad)
    async with harness.manager() as manager:
        with pytest.raises(ValueError):
            await manager.execute("print:x", session=bad)


@pytest.mark.parametrize("seconds", [0, -1, 901])
async def test_timeouts_outside_the_allowed_range_are_rejected(
    harness: Harness, seconds: float
) -> None:
    async with harness.manager() as manager:
        with pytest.raises(ValueError, match="timeout"):
            await manager.execute("print:x", timeout=seconds)


async def test_closing_the_manager_stops_every_container_it_started(harness: Harness) -> None:
    async with harness.manager(pool_size=2) as manager:
        await manager.execute("print:1", session="a")
        await manager.execute("print:2", session="b")
        with anyio.fail_after(5):
            await settle(lambda: manager.stats.pool_ready == 2)
        assert len(harness.runtime.running) == 4
    assert harness.runtime.running == {}
    assert manager.stats.live_sandboxes == 0


async def test_closing_the_manager_during_a_start_leaves_no_container(harness: Harness) -> None:
    harness.runtime.start_gate = anyio.Event()
    async with harness.manager(pool_size=1):
        with anyio.fail_after(5):
            await harness.runtime.start_begun.wait()
    assert harness.runtime.running == {}


async def test_closing_the_manager_during_a_handshake_kills_that_container(
    harness: Harness,
) -> None:
    harness.runtime.hello_gate = anyio.Event()  # the container runs but has not said hello
    async with harness.manager(pool_size=1):
        await settle(lambda: len(harness.runtime.running) == 1)
    assert harness.runtime.running == {}
    assert len(harness.runtime.killed) == 1


async def test_closing_the_manager_kills_live_sandboxes_instead_of_stopping_them(
    harness: Harness,
) -> None:
    # MCP clients SIGKILL a server ~4 s after closing its stdin: shutdown must not spend a
    # graceful stop per container.
    async with harness.manager(pool_size=0) as manager:
        await manager.execute("print:1", session="a")
        await manager.execute("print:1", session="b")
        names = sorted(harness.runtime.running)
    assert harness.runtime.running == {}
    assert sorted(harness.runtime.killed) == names
    assert harness.runtime.stopped == []


async def test_cancelling_the_manager_exit_still_stops_every_container(harness: Harness) -> None:
    with anyio.CancelScope() as outer:
        async with harness.manager(pool_size=1) as manager:
            await manager.execute("print:1", session="a")
            outer.cancel()
    assert harness.runtime.running == {}


async def test_calls_reach_the_gateway_with_the_session_and_the_reply_returns(
    harness: Harness,
) -> None:
    async with harness.manager() as manager:
        result = await manager.execute("call:files.ok\nrequest:discovered_servers", session="s1")
    ctx, server, tool = harness.gateway.calls[0]
    assert (ctx.session, server, tool) == ("s1", "files", "ok")
    assert "files.ok" in result.stdout
    assert "['alpha', 'beta']" in result.stdout


async def test_call_failures_become_faults_with_their_code(harness: Harness) -> None:
    async with harness.manager() as manager:
        result = await manager.execute("call:files.fail\ncall:files.boom\nrequest:nope")
    lines = result.stdout.splitlines()
    assert lines[0].startswith("fault 201:")  # UNKNOWN_TOOL
    assert lines[1].startswith("fault 299:")  # INTERNAL, without the exception's text
    assert "secret internal detail" not in lines[1]
    assert lines[2].startswith("fault 207:")  # UNKNOWN_METHOD


class Recorder:
    def __init__(self) -> None:
        self.output: list[tuple[str, str]] = []
        self.progress: list[tuple[float, float | None, str | None]] = []
        self.first_output = anyio.Event()
        self.first_progress = anyio.Event()

    async def on_output(self, stream: Any, text: str) -> None:
        self.output.append((stream, text))
        self.first_output.set()

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append((progress, total, message))
        self.first_progress.set()


async def test_listener_receives_output_and_progress_while_the_code_runs(harness: Harness) -> None:
    recorder = Recorder()
    async with harness.manager() as manager, anyio.create_task_group() as tg:
        tg.start_soon(
            lambda: manager.execute(
                "print:early\nerr:warn\nprogress:1/4\nhold:live", listener=recorder
            )
        )
        with anyio.fail_after(5):
            # The sandbox holds once it has written its frames; the host reads them on its own
            # task, so the last one may still be on its way: wait for it, the code still held.
            await harness.runtime.holding("live").wait()
            await recorder.first_progress.wait()
        assert recorder.output == [("stdout", "early\n"), ("stderr", "warn\n")]
        assert recorder.progress == [(1.0, 4.0, "working")]
        harness.runtime.release("live").set()


async def test_images_and_values_are_returned(harness: Harness) -> None:
    async with harness.manager() as manager:
        result = await manager.execute("display:one\nvalue:42")
    assert result.value == "42"
    assert [image.mime for image in result.images] == ["image/png"]


async def test_user_exceptions_are_error_results(harness: Harness) -> None:
    async with harness.manager() as manager:
        result = await manager.execute("print:before\nraise:ValueError=bad")
    assert result.status == "error"
    assert result.error is not None
    assert result.error.type == "ValueError"
    assert result.stdout == "before\n"


async def test_fake_runtime_satisfies_the_runtime_interface(harness: Harness) -> None:
    assert isinstance(harness.runtime, RuntimeBackend)
    assert isinstance(harness.runtime, FakeRuntime)


async def test_a_reply_the_wire_cannot_carry_becomes_a_fault_and_the_session_goes_on(
    harness: Harness,
) -> None:
    async with harness.manager() as manager:
        result = await manager.execute("call:srv.weird\nprint:after")
    assert result.status == "ok"
    assert result.stdout.startswith("fault 299:")
    assert result.stdout.endswith("after\n")


async def test_code_too_large_for_a_frame_is_an_argument_error(harness: Harness) -> None:
    async with harness.manager() as manager:
        with pytest.raises(ValueError, match="cannot be sent"):
            await manager.execute("#" * (17 * 1024 * 1024))
        assert (await manager.execute("print:still fine")).ok


async def test_frames_of_a_stale_execution_are_dropped(harness: Harness) -> None:
    async with harness.manager() as manager:
        result = await manager.execute("stale:ghost\nprint:real")
    assert result.stdout == "real\n"


class FailingListener:
    async def on_output(self, stream: Any, text: str) -> None:
        raise RuntimeError("client went away")

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        raise RuntimeError("client went away")


async def test_a_failing_listener_does_not_end_the_execution(harness: Harness) -> None:
    async with harness.manager() as manager:
        result = await manager.execute("print:one\nprint:two", listener=FailingListener())
    assert result.status == "ok"
    assert result.stdout == "one\ntwo\n"


class HangingListener:
    async def on_output(self, stream: Any, text: str) -> None:
        await anyio.sleep_forever()

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        await anyio.sleep_forever()


async def test_a_hanging_listener_is_dropped_and_the_execution_completes(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bridge_core.sessions import _execution

    monkeypatch.setattr(_execution, "LISTENER_TIMEOUT", 0.1)
    async with harness.manager() as manager:
        result = await manager.execute("print:one\nprint:two", listener=HangingListener())
    assert result.status == "ok"
    assert result.stdout == "one\ntwo\n"


async def test_an_execution_waiting_for_a_sandbox_is_answered_when_the_manager_closes(
    harness: Harness,
) -> None:
    harness.runtime.start_gate = anyio.Event()  # sandbox starts never finish
    results: list[ExecutionResult] = []

    async def run() -> None:
        results.append(await manager.execute("print:x", timeout=600))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg, harness.manager() as manager:
            tg.start_soon(run)
            await harness.runtime.start_begun.wait()
    (result,) = results
    assert result.status == "unavailable"
    assert "shutting down" in result.notices[-1]
