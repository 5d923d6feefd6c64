"""A hand-made ``bridge.toml`` that is not a screenful of keys: a FIFO, a device, a file nested
or numbered past what the TOML reader handles, a duration that is infinity. Each is an error
naming the file, never a hang, an endless read or a traceback."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from mcp_code_execution_mode.settings import Settings, SettingsError, load_settings


def _load(tmp_path: Path, timeout: float = 10.0) -> BaseException | object:
    env = {"MCP_BRIDGE_CONFIG": str(tmp_path / "servers.json")}
    outcome: list[BaseException | object] = []

    def run() -> None:
        try:
            outcome.append(load_settings({}, env))
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), "reading bridge.toml did not return"
    return outcome[0]


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_settings_file_that_is_a_fifo_or_a_device_is_refused_without_reading_it(
    tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "bridge.toml"
    if kind == "fifo":
        os.mkfifo(path)  # no writer: a blocking open or read would wait for ever
    else:
        path.symlink_to("/dev/zero")  # st_size 0, endless bytes
    outcome = _load(tmp_path)
    assert isinstance(outcome, SettingsError)
    assert str(path) in str(outcome)
    assert "not a regular file" in str(outcome)


def test_a_symlink_to_a_regular_settings_file_is_read(tmp_path: Path) -> None:
    real = tmp_path / "dotfiles.toml"
    real.write_text("[sessions]\nmax = 3\n", encoding="utf-8")
    (tmp_path / "bridge.toml").symlink_to(real)
    outcome = _load(tmp_path)
    assert isinstance(outcome, Settings)
    assert outcome.max_sessions == 3


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("x = " + "[" * 100_000 + "]" * 100_000 + "\n", "nested too deeply"),
        ("[policy]\ndeny_tools = " + "{a=" * 50_000 + "1" + "}" * 50_000, "nested too deeply"),
        ("[sessions]\nmax = " + "9" * 5000 + "\n", "is not valid TOML"),
        ('[servers]\ncall_timeout = "1' + "0" * 400 + '"\n', "call_timeout"),
        ("[servers]\ncall_timeout = 1" + "0" * 400 + "\n", "call_timeout"),
    ],
    ids=["deep-arrays", "deep-inline-tables", "huge-int", "infinite-duration", "huge-float"],
)
def test_nesting_huge_numbers_and_infinite_durations_are_errors_naming_the_file(
    tmp_path: Path, text: str, problem: str
) -> None:
    path = tmp_path / "bridge.toml"
    path.write_text(text, encoding="utf-8")
    outcome = _load(tmp_path)
    assert isinstance(outcome, SettingsError), repr(outcome)
    assert str(path) in str(outcome)
    assert problem in str(outcome)


def test_a_file_larger_than_the_bound_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bridge.toml"
    path.write_text("# " + "x" * (1024 * 1024) + "\n", encoding="utf-8")
    outcome = _load(tmp_path)
    assert isinstance(outcome, SettingsError)
    assert "larger than" in str(outcome)
