"""Settings: units, defaults, env vs flags, and one-line errors naming the variable or flag.

Every test's environment points ``XDG_CONFIG_HOME`` at an empty directory (:data:`ENV`), so that
a settings file of the machine running the tests is never read.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
from bridge_protocol.hints import encode_hint
from mcp_code_execution_mode.settings import SETTINGS, Settings, SettingsError
from mcp_code_execution_mode.settings import load_settings as _load

DOCS = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"
NOWHERE = Path(__file__).resolve().parent / "no-such-config-home"


def load_settings(flags: Mapping[str, str | None], environ: Mapping[str, str]) -> Settings:
    return _load(flags, {"XDG_CONFIG_HOME": str(NOWHERE), **environ})


def test_defaults_apply_when_nothing_is_set() -> None:
    settings = load_settings({}, {})
    assert settings == Settings(settings_file=NOWHERE / "mcp-code-execution-mode" / "bridge.toml")


def test_the_default_output_cap_is_the_session_managers() -> None:
    # The settings do not import the session types (they load after the server answers).
    from bridge_core.sessions.types import OUTPUT_CAP, SessionConfig

    assert load_settings({}, {}).output_cap == OUTPUT_CAP == SessionConfig(image="i").output_cap


@pytest.mark.parametrize(
    ("raw", "seconds"), [("30", 30.0), ("30s", 30.0), ("2m", 120.0), ("10m", 600.0), ("500ms", 0.5)]
)
def test_durations_accept_plain_seconds_and_units(raw: str, seconds: float) -> None:
    assert load_settings({}, {"MCP_BRIDGE_TIMEOUT": raw}).timeout == seconds


@pytest.mark.parametrize(
    ("raw", "size"), [("512m", 512 << 20), ("2g", 2 << 30), ("64k", 64 << 10), ("1000", 1000)]
)
def test_sizes_accept_units(raw: str, size: int) -> None:
    assert load_settings({}, {"MCP_BRIDGE_MEMORY_LIMIT": raw}).memory_limit == size


@pytest.mark.parametrize(
    ("raw", "value"),
    [("false", False), ("0", False), ("no", False), ("TRUE", True), ("1", True), ("yes", True)],
)
def test_booleans_accept_common_spellings(raw: str, value: bool) -> None:
    assert load_settings({}, {"MCP_BRIDGE_SESSION_PERSIST": raw}).session_persist is value


def test_flags_win_over_environment() -> None:
    settings = load_settings({"timeout": "10"}, {"MCP_BRIDGE_TIMEOUT": "99"})
    assert settings.timeout == 10.0


def test_empty_environment_value_means_unset() -> None:
    settings = load_settings({}, {"MCP_BRIDGE_CONFIG": "", "MCP_BRIDGE_TIMEOUT": " "})
    assert dataclasses.replace(settings, settings_file=None) == Settings()


def test_lists_and_optional_values_parse() -> None:
    settings = load_settings(
        {},
        {
            "MCP_BRIDGE_SECURITY_OPT": "label=type:container_runtime_t label=level:s0:c1,c2",
            "MCP_BRIDGE_DENY_TOOLS": "git.git_reset, fs.write_*",
            "MCP_BRIDGE_CPU_QUOTA": "50000",
            "MCP_BRIDGE_CONFIG": "~/servers.json",
            "MCP_BRIDGE_POOL_IMPORTS": "numpy, pandas pyarrow,numpy",
        },
    )
    assert settings.pool_imports == ("numpy", "pandas", "pyarrow")
    assert settings.security_opt == ("label=type:container_runtime_t", "label=level:s0:c1,c2")
    assert settings.deny_tools == ("git.git_reset", "fs.write_*")
    assert settings.cpu_quota == 50000
    assert settings.config == Path.home() / "servers.json"


@pytest.mark.parametrize(
    ("env", "raw"),
    [
        ("MCP_BRIDGE_TIMEOUT", "soon"),
        ("MCP_BRIDGE_TIMEOUT", "0"),
        ("MCP_BRIDGE_MEMORY_LIMIT", "lots"),
        ("MCP_BRIDGE_SESSION_PERSIST", "maybe"),
        ("MCP_BRIDGE_RUNTIME", "lxc"),
        ("MCP_BRIDGE_RUNTIME", "local"),
        ("MCP_BRIDGE_OUTPUT_MODE", "yaml"),
        ("MCP_BRIDGE_PIDS_LIMIT", "-1"),
        ("MCP_BRIDGE_POOL_SIZE", "x"),
        ("MCP_BRIDGE_POOL_IMPORTS", "numpy.linalg"),
        ("MCP_BRIDGE_POOL_IMPORTS", "pandas,../x"),
        ("MCP_BRIDGE_POOL_IMPORTS", ",".join(f"m{n}" for n in range(65))),
    ],
)
def test_bad_environment_value_names_the_variable(env: str, raw: str) -> None:
    with pytest.raises(SettingsError) as info:
        load_settings({}, {env: raw})
    message = str(info.value)
    assert message.startswith(f"{env}={raw!r}: expected")
    assert "\n" not in message


def test_bad_flag_value_names_the_flag() -> None:
    with pytest.raises(SettingsError, match=r"^--memory-limit='x': expected"):
        load_settings({"memory_limit": "x"}, {})


def test_timeout_above_maximum_is_rejected_naming_both() -> None:
    with pytest.raises(SettingsError, match=r"MCP_BRIDGE_TIMEOUT.*MCP_BRIDGE_MAX_TIMEOUT"):
        load_settings({}, {"MCP_BRIDGE_TIMEOUT": "20m", "MCP_BRIDGE_MAX_TIMEOUT": "10m"})


def test_every_setting_has_env_var_and_flag_named_alike() -> None:
    for setting in SETTINGS:
        assert setting.env == "MCP_BRIDGE_" + setting.name.upper()
        assert setting.flag == "--" + setting.name.replace("_", "-")


def test_configuration_doc_lists_every_setting_with_its_flag() -> None:
    text = DOCS.read_text(encoding="utf-8")
    rows = {
        m.group(1): m.group(2)
        for m in re.finditer(r"^\| `(MCP_BRIDGE_\w+)` \| `(--[\w-]+)`", text, re.M)
    }
    assert rows == {s.env: s.flag for s in SETTINGS}


def test_there_are_at_most_twenty_variables_in_the_docs_table_and_the_code() -> None:
    # The one table of docs/configuration.md: a 21st variable fails here, whichever side it is
    # added to first. A new knob belongs in the settings file, or is a constant.
    text = DOCS.read_text(encoding="utf-8")
    documented = re.findall(r"^\| `(MCP_BRIDGE_\w+)` \| `--[\w-]+`", text, re.M)
    assert len(set(documented)) == len(documented) <= 20
    assert len(SETTINGS) <= 20


def test_the_variables_of_the_public_reference_page_are_all_still_variables() -> None:
    names = {s.env for s in SETTINGS}
    for name in ("RUNTIME", "IMAGE", "OUTPUT_MODE", "TIMEOUT", "MEMORY_LIMIT",
                 "SESSION_PERSIST", "CPU_QUOTA", "PIDS_LIMIT", "SECURITY_OPT"):  # fmt: skip
        assert "MCP_BRIDGE_" + name in names


def test_cli_bad_value_prints_the_problem_and_the_fix_and_exits_2() -> None:
    # A server started by an MCP client starts anyway (integration-tests/server/
    # test_first_contact.py); a person at a command gets the error and its fix.
    proc = subprocess.run(
        [sys.executable, "-m", "mcp_code_execution_mode", "doctor", "--timeout", "whenever"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    problem, fix = proc.stderr.strip().splitlines()
    assert "--timeout='whenever'" in problem
    assert fix.strip().startswith('fix: correct --timeout in the "args"')
    assert "Traceback" not in proc.stderr


def test_cli_bad_environment_value_exits_2_naming_the_variable() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mcp_code_execution_mode", "doctor"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={
            "PATH": "/usr/bin:/bin",
            "MCP_BRIDGE_OUTPUT_MODE": "yaml",
            "XDG_CONFIG_HOME": str(NOWHERE),
        },
    )
    assert proc.returncode == 2
    assert "MCP_BRIDGE_OUTPUT_MODE='yaml': expected one of compact, toon" in proc.stderr
    assert "Traceback" not in proc.stderr


LONG = ",".join(f"m{n:02d}" + "x" * 97 for n in range(64))  # 64 names of 100: 6,464 bytes


def test_names_past_a_hint_s_bytes_are_refused_not_cut() -> None:
    # Before: accepted, then cut by encode_hint (2,048 bytes) to the first 20 names, silently.
    with pytest.raises(SettingsError) as info:
        load_settings({}, {"MCP_BRIDGE_POOL_IMPORTS": LONG})
    assert str(info.value).startswith(f"MCP_BRIDGE_POOL_IMPORTS={LONG!r}: expected")


def test_the_largest_accepted_value_is_imported_whole() -> None:
    names = [f"m{n:02d}" + "x" * 28 for n in range(64)]  # 64 * (31 + 1) = 2,048: the limit
    settings = load_settings({}, {"MCP_BRIDGE_POOL_IMPORTS": ",".join(names)})
    assert encode_hint(list(settings.pool_imports)).decode().split("\n") == names


def test_one_character_past_the_largest_is_refused() -> None:
    raw = ",".join([f"m{n:02d}" + "x" * 28 for n in range(63)] + ["m63" + "x" * 29])
    with pytest.raises(SettingsError):
        load_settings({}, {"MCP_BRIDGE_POOL_IMPORTS": raw})
