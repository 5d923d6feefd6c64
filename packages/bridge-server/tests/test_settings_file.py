"""The settings file (``bridge.toml`` beside the servers file) and the old variables that moved
there: keys set settings, a bad key is an error naming the key and its line, an old variable
still works this release and is reported once, in the log and by ``doctor``."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from mcp_code_execution_mode._deprecated import MOVED, NEVER_READ, old_flag, old_name
from mcp_code_execution_mode._doctor_report import Report
from mcp_code_execution_mode._settings_file import FILE_KEYS, key_line
from mcp_code_execution_mode.doctor import _report_settings_file
from mcp_code_execution_mode.settings import SettingsError, load_settings

DOCS = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"


def write(tmp_path: Path, text: str) -> tuple[Path, dict[str, str]]:
    """A settings file holding ``text`` beside the servers file, and the environment naming it."""
    path = tmp_path / "bridge.toml"
    path.write_text(text, encoding="utf-8")
    return path, {"MCP_BRIDGE_CONFIG": str(tmp_path / "servers.json")}


def test_the_file_beside_the_servers_file_sets_policy_approvals_and_quotas(
    tmp_path: Path,
) -> None:
    _, env = write(
        tmp_path,
        """
        # why github.delete_* is denied: shared repositories
        [policy]
        deny_tools = ["github.delete_*", "fs.write_*"]
        allow_servers = ["github", "fs"]

        [approval]
        mode = "writes"
        timeout = 30

        [sessions]
        max = 3
        state_disk = "2g"

        [servers]
        call_timeout = "2m"
        """,
    )
    settings = load_settings({}, env)
    assert settings.settings_file == tmp_path / "bridge.toml"
    assert settings.deny_tools == ("github.delete_*", "fs.write_*")
    assert settings.allow_servers == ("github", "fs")
    assert settings.approval == "writes"
    assert settings.approval_timeout == 30.0
    assert settings.max_sessions == 3
    assert settings.session_state_disk == 2 << 30
    assert settings.call_timeout == 120.0
    assert settings.deprecations == ()


def test_without_a_servers_file_the_file_is_in_the_bridge_s_config_folder(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "mcp-code-execution-mode"
    folder.mkdir()
    (folder / "bridge.toml").write_text("[sandbox]\npool_size = 0\n", encoding="utf-8")
    settings = load_settings({}, {"XDG_CONFIG_HOME": str(tmp_path)})
    assert settings.pool_size == 0


@pytest.mark.parametrize(
    ("text", "line", "key"),
    [
        ('[approval]\nmode = "sometimes"\n', 2, "[approval] mode"),
        ('# policy\n\n[policy]\ndeny_tools = "git.reset"\n', 4, "[policy] deny_tools"),
        ("[sessions]\nmax = 4\nmax_per_client = true\n", 3, "[sessions] max_per_client"),
        ('[sandbox]\npool_size = 1\n\n[servers]\n  call_timeout = "soon"\n', 5,
         "[servers] call_timeout"),
        ('sessions.idle_ttl = "later"\n', 1, "[sessions] idle_ttl"),
        ('[policy]\ndeny_tools = [\n  "a",\n  3,\n]\n', 2, "[policy] deny_tools"),
    ],
)  # fmt: skip
def test_a_bad_value_is_an_error_naming_the_key_and_its_line(
    tmp_path: Path, text: str, line: int, key: str
) -> None:
    path, env = write(tmp_path, text)
    with pytest.raises(SettingsError) as caught:
        load_settings({}, env)
    message = str(caught.value)
    assert message.startswith(f"{path}:{line}: {key} = ")
    assert "\n" not in message
    assert caught.value.names == (key,)
    assert caught.value.fix == f"correct {key} in {path}:{line}, then restart the server"


def test_a_misspelt_key_is_an_error_not_a_silently_allowed_tool(tmp_path: Path) -> None:
    path, env = write(tmp_path, '[policy]\ndeny_tool = ["github.delete_*"]\n')
    with pytest.raises(SettingsError) as caught:
        load_settings({}, env)
    assert str(caught.value).startswith(f"{path}:2: [policy] deny_tool is not a key")
    assert "deny_tools" in str(caught.value)  # the keys it could have meant are listed


def test_an_unknown_section_is_an_error_naming_it_and_its_line(tmp_path: Path) -> None:
    path, env = write(tmp_path, "[sandbox]\npool_size = 2\n\n[sesions]\nmax = 2\n")
    with pytest.raises(SettingsError) as caught:
        load_settings({}, env)
    assert str(caught.value).startswith(f"{path}:4: 'sesions' is not a section")


def test_a_file_that_is_not_toml_is_an_error_naming_the_file_and_tomllib_s_line(
    tmp_path: Path,
) -> None:
    path, env = write(tmp_path, "[policy]\ndeny_tools = oops\n")
    with pytest.raises(SettingsError) as caught:
        load_settings({}, env)
    assert str(caught.value).startswith(f"{path}:2: is not valid TOML: ")
    assert caught.value.fix == f"correct the file in {path}:2, then restart the server"


def test_a_key_s_line_is_found_in_every_way_toml_writes_it() -> None:
    text = '[a]\nx = 1\n[b . "c"]\ny = 2\nb.z = 3\n[d]\ne = {f = 1}\n'
    assert key_line(text, "a", "x") == 2
    assert key_line(text, "b", "c") == 3
    assert key_line(text, "d", "e") == 7
    assert key_line("top.key = 1\n", "top", "key") == 1
    assert key_line("top = {key = 1}\n", "top", "key") == 1
    assert key_line("[a]\nx = 1\n", "a", "missing") is None


def old_value(variable: str) -> str:
    kind = next(k.kind for k in FILE_KEYS if k.name == MOVED[variable])
    return {
        "duration": "7s",
        "size": "3m",
        "count": "3",
        "path": "/srv/x",
        "list": "numpy" if "IMPORTS" in variable else "a.b",
        "name": "other",
    }.get(kind, {"MCP_BRIDGE_APPROVAL": "all", "MCP_BRIDGE_APPROVAL_FALLBACK": "allow"}.get(
        variable, "stdio"))  # fmt: skip


MOVED_TO_FILE = [v for v, home in MOVED.items() if not home.startswith("constant ")]


@pytest.mark.parametrize("variable", MOVED_TO_FILE)
def test_each_old_variable_is_still_honoured_and_reported_once(
    variable: str, tmp_path: Path
) -> None:
    spec = next(k for k in FILE_KEYS if k.name == MOVED[variable])
    raw = old_value(variable)
    settings = load_settings({}, {variable: raw, "XDG_CONFIG_HOME": str(tmp_path)})
    assert getattr(settings, spec.field) == spec.parse(raw)
    [deprecation] = settings.deprecations
    assert deprecation.old == variable
    assert deprecation.applied
    assert f"under [{spec.section}] in {tmp_path}" in deprecation.fix
    assert f"`{spec.key} = ...`" in deprecation.fix


def test_an_old_flag_is_honoured_and_reported_by_its_flag_name(tmp_path: Path) -> None:
    variable = "MCP_BRIDGE_POOL_SIZE"
    settings = load_settings({old_name(variable): "0"}, {"XDG_CONFIG_HOME": str(tmp_path)})
    assert settings.pool_size == 0
    assert [d.old for d in settings.deprecations] == [old_flag(variable)] == ["--pool-size"]


def test_the_file_wins_over_an_old_variable_which_is_reported_ignored(tmp_path: Path) -> None:
    path, env = write(tmp_path, "[sessions]\nmax = 5\n")
    settings = load_settings({}, {**env, "MCP_BRIDGE_MAX_SESSIONS": "2"})
    assert settings.max_sessions == 5
    [deprecation] = settings.deprecations
    assert not deprecation.applied
    assert f"ignored: {path} sets it" in deprecation.line


def test_a_bad_old_variable_is_still_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=r"^MCP_BRIDGE_POOL_SIZE='x': expected"):
        load_settings({}, {"MCP_BRIDGE_POOL_SIZE": "x", "XDG_CONFIG_HOME": str(tmp_path)})


@pytest.mark.parametrize(
    "variable", [v for v, home in MOVED.items() if home.startswith("constant ")]
)
def test_a_bound_that_is_now_a_constant_cannot_be_raised_by_its_old_variable(
    variable: str, tmp_path: Path
) -> None:
    settings = load_settings({}, {variable: "1g", "XDG_CONFIG_HOME": str(tmp_path)})
    [deprecation] = settings.deprecations
    assert not deprecation.applied
    assert "is no longer a setting and is ignored" in deprecation.line
    assert MOVED[variable].removeprefix("constant ") in deprecation.line


@pytest.mark.parametrize(
    ("raw", "mode"), [("direct", "direct"), (" Both ", "both"), ("x", "direct")]
)
def test_mcp_bridge_tools_is_ignored_and_reported_with_the_file_key_and_the_flag(
    raw: str, mode: str, tmp_path: Path
) -> None:
    # Issue 36 named the variable; the mode is [tools] mode or serve --tools (decision 0100).
    settings = load_settings({}, {"MCP_BRIDGE_TOOLS": raw, "XDG_CONFIG_HOME": str(tmp_path)})
    assert settings.tools == "code"
    [deprecation] = settings.deprecations
    assert (deprecation.old, deprecation.applied) == ("MCP_BRIDGE_TOOLS", False)
    assert "is not a setting and is ignored" in deprecation.line
    path = tmp_path / "mcp-code-execution-mode" / "bridge.toml"
    assert deprecation.fix == (
        f'remove MCP_BRIDGE_TOOLS and write `mode = "{mode}"` under [tools] in {path}, or start '
        f"the bridge with `serve --tools {mode}`"
    )


def test_doctor_prints_each_deprecation_with_the_file_key_to_use(tmp_path: Path) -> None:
    settings = load_settings(
        {}, {"MCP_BRIDGE_DENY_TOOLS": "git.reset", "XDG_CONFIG_HOME": str(tmp_path)}
    )
    out = io.StringIO()
    _report_settings_file(settings, Report(out))
    lines = out.getvalue().splitlines()
    path = tmp_path / "mcp-code-execution-mode" / "bridge.toml"
    assert lines[0] == f"[ok]   settings file: none ({path} is not there)"
    assert lines[1].startswith("[warn] deprecated: MCP_BRIDGE_DENY_TOOLS is deprecated (used")
    assert lines[2] == (
        f"       fix: remove MCP_BRIDGE_DENY_TOOLS and write `deny_tools = ...` under [policy] "
        f"in {path}"
    )


def test_the_server_logs_each_deprecation_once_at_start(tmp_path: Path) -> None:
    # `token` without a token file stops right after logging is set up: no sandbox, no server.
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "XDG_CONFIG_HOME": str(tmp_path),
        "MCP_BRIDGE_STATE_DIR": str(tmp_path / "state"),
        "MCP_BRIDGE_LOG_FILE": "off",
        "MCP_BRIDGE_POOL_SIZE": "0",
        "MCP_BRIDGE_TOOLS": "direct",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "mcp_code_execution_mode", "token", "someone"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("MCP_BRIDGE_POOL_SIZE is deprecated") == 1
    assert "write `pool_size = ...` under [sandbox]" in proc.stderr
    assert proc.stderr.count("MCP_BRIDGE_TOOLS is not a setting and is ignored") == 1
    assert 'write `mode = "direct"` under [tools]' in proc.stderr
    assert "`serve --tools direct`" in proc.stderr


def test_the_docs_list_every_file_key_and_every_old_variable_with_its_home() -> None:
    text = DOCS.read_text(encoding="utf-8")
    keys = set(re.findall(r"^\| `\[(\w+)\] (\w+)` \|", text, re.M))
    assert keys == {(k.section, k.key) for k in FILE_KEYS}
    moved = dict(re.findall(r"^\| `(MCP_BRIDGE_\w+)` \| `((?:\[|constant )[^`]+)` \|", text, re.M))
    assert moved == {**MOVED, **NEVER_READ}


def test_setup_refuses_an_old_flag_instead_of_writing_it_into_a_client_config(
    tmp_path: Path,
) -> None:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path),
           "XDG_CONFIG_HOME": str(tmp_path / ".config")}  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "mcp_code_execution_mode", "setup", "cursor", "--pool-size", "2"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert proc.returncode == 2
    assert "--pool-size is deprecated" in proc.stderr
    assert "write `pool_size = ...` under [sandbox]" in proc.stderr
    assert not (tmp_path / ".cursor").exists()
