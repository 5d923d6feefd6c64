"""The persistent interpreter: namespace, event loop, trailing values, errors."""

from __future__ import annotations

from typing import Any


def test_variables_functions_and_imports_survive_between_executions(host: Any) -> None:
    host.execute("import math\ncount = 41\ndef bump(x):\n    return x + 1")
    run = host.execute("bump(count) + math.floor(0.5)")
    assert run.result.status == "ok"
    assert run.result.value == "42"


def test_trailing_expression_value_is_returned_as_repr(host: Any) -> None:
    run = host.execute("x = 'a'\n{'k': [1, 2], 's': x}")
    assert run.result.value == "{'k': [1, 2], 's': 'a'}"


def test_statement_or_none_trailing_value_returns_no_value(host: Any) -> None:
    assert host.execute("y = 3").result.value is None
    assert host.execute("None").result.value is None
    assert host.execute("print('p')").result.value is None


def test_trailing_value_repr_is_capped_at_repr_limit(host: Any) -> None:
    run = host.execute("'x' * 5000", repr_limit=100)
    assert run.result.value is not None
    assert len(run.result.value) <= 100
    assert run.result.value.startswith("'xxx")
    assert "more characters" in run.result.value


def test_failing_repr_is_reported_not_raised(host: Any) -> None:
    code = "class Bad:\n    def __repr__(self):\n        raise RuntimeError('no')\nBad()"
    run = host.execute(code)
    assert run.result.status == "ok"
    assert "repr() failed" in (run.result.value or "")


def test_top_level_await_returns_the_awaited_value(host: Any) -> None:
    run = host.execute("import asyncio\nawait asyncio.sleep(0)\nawait asyncio.sleep(0, 'done')")
    assert run.result.status == "ok"
    assert run.result.value == "'done'"


def test_asyncio_queue_and_task_created_in_one_execution_work_in_the_next(host: Any) -> None:
    first = host.execute(
        "import asyncio\n"
        "queue = asyncio.Queue()\n"
        "async def worker():\n"
        "    item = await queue.get()\n"
        "    return item * 2\n"
        "task = asyncio.create_task(worker())\n"
        "await asyncio.sleep(0)"
    )
    assert first.result.status == "ok", first.result.error
    run = host.execute("await queue.put(21)\nawait task")
    assert run.result.status == "ok", run.result.error
    assert run.result.value == "42"


def test_asyncio_run_works_in_plain_code(host: Any) -> None:
    run = host.execute("import asyncio\nasync def main():\n    return 5\nasyncio.run(main())")
    assert run.result.status == "ok", run.result.error
    assert run.result.value == "5"
    # ...and the persistent loop still works afterwards.
    assert host.execute("import asyncio\nawait asyncio.sleep(0, 6)").result.value == "6"


def test_code_that_never_touches_asyncio_leaves_it_unimported(host: Any) -> None:
    # Every idle session and warm sandbox would otherwise hold it (~2.5 MiB: bench/density.py),
    # and the traceback shaper's sysconfig (~0.5 MiB) until a traceback is shaped.
    # (the module's name is spelled in two parts: a cell naming it makes the loop, by design)
    loaded = "x = 1\nimport sys\n'async' 'io' in sys.modules, 'sysconfig' in sys.modules"
    assert host.execute(loaded).result.value == "(False, False)"
    assert host.execute("await mcp_servers['media'].nothing()").result.status == "ok"
    assert host.execute("import json\njson.loads('{')").result.status == "error"
    assert host.execute(loaded).result.value == "(True, True)"


def test_an_idle_client_leaves_its_parser_the_call_futures_and_the_save_modules_unimported(
    host: Any,
) -> None:
    # argparse (~0.6 MiB), concurrent.futures (with logging, ~0.9), hashlib and tarfile (~1.6,
    # the saving child's) are each loaded by what first needs them (bench/density.py measures it).
    loaded = (
        "import sys\n"
        "[m for m in ('argparse', 'concurrent', 'hashlib', 'tarfile') if m in sys.modules]"
    )
    assert host.execute("x = 1").result.status == "ok"
    assert host.execute(loaded).result.value == "[]"
    # A blocking call, which (unlike an awaited one) loads no asyncio to bring it along.
    assert host.execute("mcp_servers['media'].nothing.sync()").result.status == "ok"
    assert host.execute(loaded).result.value == "['concurrent']"


def test_a_loop_plain_code_gets_in_its_first_asyncio_cell_is_the_one_later_awaits_run_on(
    host: Any,
) -> None:
    first = host.execute(
        "import asyncio\n"
        "loop = asyncio.get_event_loop()\n"
        "queue = asyncio.Queue()\n"
        "async def worker():\n"
        "    return await queue.get() * 2\n"
        "task = loop.create_task(worker())"
    )
    assert first.result.status == "ok", first.result.error
    assert first.stderr == ""  # the persistent loop was current: no "no current event loop"
    run = host.execute("await queue.put(21)\n(await task, asyncio.get_running_loop() is loop)")
    assert run.result.status == "ok", run.result.error
    assert run.result.value == "(42, True)"


EXHAUSTS_DESCRIPTORS = (
    "import os, resource\n"
    "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
    "resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))\n"
    "held = []\n"
    "try:\n"
    "    while True:\n"
    "        held.append(os.open(os.devnull, os.O_RDONLY))\n"
    "except OSError:\n"
    "    pass\n"
    "kept = 'state'"
)
"""A cell that holds every file descriptor it can get (in ``held``; ``kept`` is its state)."""


def test_a_cell_whose_loop_cannot_be_made_fails_and_the_sandbox_goes_on(host: Any) -> None:
    # The loop is made when a cell first needs it; with no file descriptor left that fails, and
    # it must be that cell's error, not the end of the sandbox and its state.
    exhausted = host.execute(EXHAUSTS_DESCRIPTORS)
    assert exhausted.result.status == "ok", exhausted.result.error
    failed = host.execute("import asyncio\n'unreached'")
    assert failed.result.status == "error"
    assert host.execute("for fd in held:\n    os.close(fd)\nkept").result.value == "'state'"
    assert host.execute("import asyncio\nawait asyncio.sleep(0, 'back')").result.value == "'back'"


def test_a_first_call_whose_futures_cannot_be_imported_fails_and_the_sandbox_goes_on(
    host: Any,
) -> None:
    # concurrent.futures is imported by the first call, in the thread of the code making it:
    # with no file descriptor left that fails, as that call's error, and the next call imports it.
    exhausted = host.execute(EXHAUSTS_DESCRIPTORS)
    assert exhausted.result.status == "ok", exhausted.result.error
    failed = host.execute("mcp_servers['github'].list_issues.sync()")
    assert failed.result.status == "error"
    assert failed.result.error is not None
    assert failed.result.error.type in ("OSError", "ImportError")
    assert host.execute("for fd in held:\n    os.close(fd)\nkept").result.value == "'state'"
    back = host.execute("mcp_servers['github'].list_issues.sync()")
    assert back.result.value == "[{'title': 'bug'}, {'title': 'crash'}]", back.result.error


def test_plain_code_after_asyncio_was_imported_finds_the_persistent_loop(host: Any) -> None:
    host.execute("import asyncio")
    run = host.execute(
        "loop = asyncio.get_event_loop()\nawait asyncio.sleep(0)\n"
        "asyncio.get_running_loop() is loop"
    )
    assert run.result.status == "ok", run.result.error
    assert run.result.value == "True"
    assert run.stderr == ""


def test_exception_traceback_shows_only_user_frames_with_source_lines(host: Any) -> None:
    host.execute("def inner(v):\n    return 10 / v\n")
    run = host.execute("x = 1\ninner(0)")
    assert run.result.status == "error"
    error = run.result.error
    assert error is not None
    assert error.type == "ZeroDivisionError"
    assert error.message == "division by zero"
    assert 'File "<cell 2>", line 2, in <module>' in error.traceback
    assert "inner(0)" in error.traceback
    assert 'File "<cell 1>", line 2, in inner' in error.traceback
    assert "return 10 / v" in error.traceback
    assert "bridge_sandbox_client" not in error.traceback
    assert "asyncio" not in error.traceback


def test_async_exception_traceback_hides_the_event_loop(host: Any) -> None:
    run = host.execute("import asyncio\nawait asyncio.sleep(0)\nraise KeyError('missing')")
    error = run.result.error
    assert error is not None
    assert error.type == "KeyError"
    assert error.traceback.startswith('Traceback (most recent call last):\n  File "<cell 1>"')
    assert "base_events" not in error.traceback
    assert "bridge_sandbox_client" not in error.traceback


def test_tool_error_traceback_has_no_frames_of_the_client(host: Any) -> None:
    run = host.execute("await mcp_servers['media'].fails()")
    error = run.result.error
    assert error is not None
    assert error.type == "mcp.ToolError"
    assert "bridge_sandbox_client/" not in error.traceback
    assert "repository not found" in error.traceback


def test_a_mistyped_tool_shows_the_users_line_and_the_hosts_answer_only(host: Any) -> None:
    for code in ("await mcp_servers['files'].read_fil(path='x')",
                 "mcp_servers['files'].read_fil.sync(path='x')"):  # fmt: skip
        error = host.execute(code).result.error
        assert error is not None
        assert error.type == "mcp.UnknownTool"
        lines = error.traceback.splitlines()
        frames = [line for line in lines if line.startswith("  File ")]
        assert len(frames) == 1
        assert frames[0].startswith('  File "<cell ')
        assert "concurrent" not in error.traceback
        assert lines[-1].endswith("host suggests ['read_file']")


def test_syntax_error_names_the_cell_and_line(host: Any) -> None:
    run = host.execute("x = 1\nif x\n    pass")
    assert run.result.status == "error"
    error = run.result.error
    assert error is not None
    assert error.type == "SyntaxError"
    assert '"<cell 1>", line 2' in error.traceback
    assert host.execute("1 + 1").result.value == "2"


def test_exception_chain_is_kept_and_trimmed(host: Any) -> None:
    run = host.execute(
        "try:\n    {}['k']\nexcept KeyError as e:\n    raise ValueError('bad') from e"
    )
    error = run.result.error
    assert error is not None
    assert "KeyError: 'k'" in error.traceback
    assert "direct cause" in error.traceback
    assert error.traceback.rstrip().endswith("ValueError: bad")


def test_sys_exit_does_not_end_the_sandbox(host: Any) -> None:
    assert host.execute("import sys\nsys.exit(0)").result.status == "ok"
    run = host.execute("import sys\nsys.exit(3)")
    assert run.result.status == "error"
    assert run.result.error is not None
    assert run.result.error.type == "SystemExit"
    assert host.execute("'alive'").result.value == "'alive'"


def test_input_reads_end_of_file_instead_of_hanging(host: Any) -> None:
    run = host.execute("input()")
    assert run.result.error is not None
    assert run.result.error.type == "EOFError"


def test_user_classes_pickle_through_the_main_module(host: Any) -> None:
    run = host.execute(
        "import pickle\nclass Point:\n    def __init__(self, x):\n        self.x = x\n"
        "pickle.loads(pickle.dumps(Point(4))).x"
    )
    assert run.result.value == "4", run.result.error


def test_user_code_sees_clean_argv_and_main_module(host: Any) -> None:
    run = host.execute("import sys\n(sys.argv, __name__)")
    assert run.result.value == "([''], '__main__')"


def test_runtime_and_mcp_servers_are_bound_without_import(host: Any) -> None:
    run = host.execute("(runtime.__name__, type(mcp_servers).__name__)")
    assert run.result.value == "('mcp.runtime', 'ServersMapping')"


def test_lone_surrogates_in_errors_and_values_cannot_break_the_channel(host: Any) -> None:
    run = host.execute("raise ValueError('bad \\udcff char')")
    assert run.result.error is not None
    assert "bad" in run.result.error.message
    run = host.execute("class Odd:\n    def __repr__(self):\n        return 'odd \\udcff'\nOdd()")
    assert run.result.status == "ok"
    assert (run.result.value or "").startswith("odd ")
    assert host.execute("'alive'").result.value == "'alive'"


def test_a_value_too_large_for_a_frame_still_ends_the_execution(host: Any) -> None:
    run = host.execute("'x' * 20_000_000", repr_limit=30_000_000)
    assert run.result.status == "error"
    assert run.result.error is not None
    assert run.result.error.type == "ResultTooLarge"
    assert host.execute("'alive'").result.value == "'alive'"


def test_tasks_left_on_the_loop_keep_running_between_executions(host: Any) -> None:
    from bridge_protocol import Progress

    host.execute(
        "import asyncio\n"
        "gate = asyncio.Event()\n"
        "async def background():\n"
        "    await gate.wait()\n"
        "    runtime.progress(1, message='background ran')\n"
        "    return 'finished'\n"
        "task = asyncio.create_task(background())\n"
        "asyncio.get_running_loop().call_later(0.01, gate.set)\n"
        "await asyncio.sleep(0)"
    )
    # No execution is running now; the task still finishes and reports.
    progress = host.wait_for(Progress)
    assert progress.message == "background ran"
    assert host.execute("task.done(), task.result()").result.value == "(True, 'finished')"


def test_a_background_task_raising_system_exit_does_not_end_the_sandbox(host: Any) -> None:
    from bridge_protocol import Progress

    host.execute(
        "import asyncio, sys\n"
        "async def quitter():\n"
        "    await asyncio.sleep(0.01)\n"
        "    runtime.progress(1)\n"
        "    sys.exit(4)\n"
        "t = asyncio.create_task(quitter())\n"
        "await asyncio.sleep(0)"
    )
    host.wait_for(Progress)
    run = host.execute("'alive'")
    assert run.result.value == "'alive'"
