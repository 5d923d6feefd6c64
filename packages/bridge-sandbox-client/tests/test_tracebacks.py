"""What an error looks like to the model: the user's frames, one frame per library run, no
plumbing, and a line about the missing network when the error comes from a network attempt.

In-process: user code is compiled as ``<cell N>`` the way the interpreter does, and the
exceptions it raises are described by :func:`error_info` directly.
"""

from __future__ import annotations

import concurrent.futures
import errno
import linecache
import socket
import urllib.error
from typing import Any

import pytest
from bridge_sandbox_client._traceback import NO_NETWORK_HINT, error_info


def raised_by(source: str, filename: str = "<cell 1>", **names: Any) -> BaseException:
    """Run ``source`` as user code named ``filename``; return what it raised."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    try:
        exec(compile(source, filename, "exec"), dict(names))
    except BaseException as error:  # the error under test, whatever it is
        return error
    raise AssertionError("the code raised nothing")


def files_of(traceback: str) -> list[str]:
    """The file of each frame shown, in order."""
    return [line.split('"')[1] for line in traceback.splitlines() if line.startswith('  File "')]


def test_waiting_on_a_call_shows_no_concurrent_futures_frame() -> None:
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    future.set_exception(LookupError("server 'files' has no tool 'read_fil'"))
    info = error_info(raised_by("x = 1\nfuture.result()\n", future=future))
    assert files_of(info.traceback) == ["<cell 1>"]
    assert "future.result()" in info.traceback
    assert "concurrent" not in info.traceback


def test_a_library_run_is_cut_to_its_last_frame_around_a_user_callback() -> None:
    source = (
        "import json\n"
        "def hook(pairs):\n"
        "    return pairs['missing']\n"
        "json.loads('{\"a\": 1}', object_hook=hook)\n"
    )
    info = error_info(raised_by(source))
    files = files_of(info.traceback)
    # The cell, json's last frame (where it called back), the callback: decode/loads are gone.
    assert files[0] == "<cell 1>"
    assert files[-1] == "<cell 1>"
    assert [f.rsplit("/", 2)[-2:] for f in files[1:-1]] == [["json", "decoder.py"]]
    assert info.traceback.rstrip().endswith("KeyError: 'missing'")


def test_a_library_frame_shows_one_source_line_and_no_carets() -> None:
    info = error_info(raised_by("import json\njson.loads('{x')\n"))
    library = info.traceback.split("decoder.py", 1)[1].splitlines()
    assert library[1].strip()  # its source line...
    assert library[2].startswith("json.decoder.JSONDecodeError")  # ...then no caret line


def test_frames_of_a_users_own_module_file_are_kept(tmp_path: Any) -> None:
    helper = str(tmp_path / "helper.py")
    source = "def explode():\n    raise ValueError('from helper')\n"
    linecache.cache[helper] = (len(source), None, source.splitlines(True), helper)
    module: dict[str, Any] = {}
    exec(compile(source, helper, "exec"), module)
    info = error_info(raised_by("explode()\n", explode=module["explode"]))
    assert files_of(info.traceback) == ["<cell 1>", helper]


@pytest.mark.parametrize(
    "source",
    [
        "raise socket.gaierror(socket.EAI_AGAIN, 'Temporary failure in name resolution')",
        "raise OSError(errno.ENETUNREACH, 'Network is unreachable')",
        "raise ConnectionRefusedError(errno.ECONNREFUSED, 'Connection refused')",
        "raise urllib.error.URLError(OSError(errno.EHOSTUNREACH, 'No route to host'))",
        # A client library's own error, raised while handling the socket error.
        "try:\n"
        "    raise socket.gaierror(socket.EAI_NONAME, 'Name or service not known')\n"
        "except OSError as e:\n"
        "    raise RuntimeError('Max retries exceeded') from e",
    ],
)
def test_a_network_attempt_ends_with_the_no_network_line(source: str) -> None:
    info = error_info(raised_by(source, socket=socket, errno=errno, urllib=urllib))
    assert info.traceback.rstrip("\n").endswith(NO_NETWORK_HINT)
    assert info.traceback.count(NO_NETWORK_HINT) == 1


@pytest.mark.parametrize(
    "source",
    [
        "raise ValueError('bad value')",
        "open('/nonexistent/file')",
        "raise OSError(errno.EACCES, 'Permission denied')",
        "raise TimeoutError('slow')",
    ],
)
def test_other_errors_get_no_network_line(source: str) -> None:
    info = error_info(raised_by(source, errno=errno))
    assert NO_NETWORK_HINT not in info.traceback


def test_a_library_error_that_quotes_the_error_it_caught_is_shown_once() -> None:
    # urllib catches the OSError in its own code and raises a URLError that quotes it (as it
    # does with the socket error of a network attempt): the OSError's frames add nothing.
    source = "import urllib.request\nurllib.request.urlopen('file:///nonexistent/data.csv')\n"
    info = error_info(raised_by(source))
    assert info.type == "urllib.error.URLError"
    assert "During handling" not in info.traceback
    assert "No such file or directory" in info.traceback
    assert files_of(info.traceback)[0] == "<cell 1>"
    assert len(files_of(info.traceback)) == 2


def test_an_implicit_context_that_says_something_new_is_kept() -> None:
    source = "try:\n    {}['k']\nexcept KeyError:\n    raise ValueError('bad')\n"
    info = error_info(raised_by(source))
    assert "During handling" in info.traceback
    assert "KeyError: 'k'" in info.traceback
