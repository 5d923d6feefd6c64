"""stdout and stderr: captured at the fd level, exact, streamed, coalesced."""

from __future__ import annotations

from typing import Any

from bridge_protocol import Output, Result


def test_print_output_is_exact_including_blank_lines_and_whitespace(host: Any) -> None:
    code = (
        "print('a')\nprint()\nprint('  b  ')\nprint(())\n"
        "print('tab\\there', end='')\nprint('\\n\\n')"
    )
    run = host.execute(code)
    assert run.stdout == "a\n\n  b  \n()\ntab\there\n\n\n"
    assert run.stderr == ""


def test_stderr_is_captured_separately(host: Any) -> None:
    run = host.execute("import sys\nprint('out')\nprint('err', file=sys.stderr)")
    assert run.stdout == "out\n"
    assert run.stderr == "err\n"


def test_subprocess_and_raw_fd_writes_are_captured(host: Any) -> None:
    run = host.execute(
        "import os, subprocess\n"
        "subprocess.run(['echo', 'from child'])\n"
        "subprocess.run(['sh', '-c', 'echo child err >&2'])\n"
        "os.write(1, b'raw\\n')\n"
        "os.write(2, b'raw err\\n')"
    )
    assert run.stdout == "from child\nraw\n"
    assert run.stderr == "child err\nraw err\n"


def test_all_output_precedes_the_result_frame(host: Any) -> None:
    run = host.execute("import sys\nprint('no newline', end='')\nsys.stderr.write('e')")
    assert isinstance(run.frames[-1], Result)
    assert run.stdout == "no newline"
    assert run.stderr == "e"


def test_multibyte_characters_split_across_writes_are_decoded_whole(host: Any) -> None:
    run = host.execute(
        "import os\ndata = 'é€😀'.encode()\n"
        "for i in range(len(data)):\n    os.write(1, data[i:i+1])"
    )
    assert run.stdout == "é€😀"


def test_invalid_utf8_becomes_replacement_characters(host: Any) -> None:
    run = host.execute("import os\nos.write(1, b'a\\xffb')")
    assert run.stdout == "a\ufffdb"


def test_huge_output_arrives_complete_in_coalesced_frames(host: Any) -> None:
    run = host.execute("for i in range(200_000):\n    print(i)")
    expected = "".join(f"{i}\n" for i in range(200_000))
    assert run.stdout == expected
    outputs = [f for f in run.frames if isinstance(f, Output)]
    assert len(outputs) < 2_000


def test_printing_protocol_like_bytes_cannot_corrupt_the_channel(host: Any) -> None:
    run = host.execute("import os\nos.write(1, b'\\x00\\x00\\x00\\x05\\xa1dkind')\nprint('ok')")
    assert run.result.status == "ok"
    assert host.execute("1").result.value == "1"


def test_output_of_a_thread_still_running_after_its_execution_reaches_a_later_one(
    host: Any,
) -> None:
    host.execute(
        "import threading\n"
        "go, printed = threading.Event(), threading.Event()\n"
        "def late():\n    go.wait()\n    print('late line')\n    printed.set()\n"
        "t = threading.Thread(target=late)\nt.start()"
    )
    second = host.execute("go.set()")
    third = host.execute("printed.wait(20)\nt.join(20)\n'joined'")
    assert third.result.value == "'joined'"
    assert (second.stdout + third.stdout).count("late line\n") == 1


def test_streams_broken_by_one_execution_are_repaired_for_the_next(host: Any) -> None:
    host.execute("import io, os, sys\nsys.stdout = io.StringIO()\nos.close(2)")
    run = host.execute("import os, sys\nprint('out again')\nos.write(2, b'err again')")
    assert run.stdout == "out again\n"
    assert run.stderr == "err again"


def test_streams_set_to_none_end_the_execution_normally_and_are_repaired(host: Any) -> None:
    broken = host.execute("import sys\nsys.stdout = None\nsys.stderr = None\nprint('gone')\n7")
    run = host.execute("print('out again')\n6 * 7")
    assert broken.result.status == "ok"
    assert broken.result.value == "7"
    assert run.stdout == "out again\n"
    assert run.result.value == "42"


def test_text_left_buffered_by_a_closed_stdout_belongs_to_its_own_execution(host: Any) -> None:
    closed = host.execute("import os\nos.close(1)\nprint('written before the error')")
    run = host.execute("print('next')")
    assert closed.result.error.type == "OSError"
    assert closed.stdout == "written before the error\n"
    assert run.stdout == "next\n"
