"""Secrets stay on the host: canaries in the bridge's environment and in proxied servers' ``env``
are looked for from sandbox code everywhere it can read, through the real bridge and podman.

Sandbox code gets the canaries in two halves and joins them at run time, so no file or argv of
the sandbox holds a canary unless the product put it there. It reports only *where* it found
one, never the value; the host side also checks every text it received.
"""

from __future__ import annotations

import json
import secrets
import socket
import sys
from ast import literal_eval
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from .conftest import code_text, open_bridge

pytestmark = pytest.mark.container

PROBE = Path(__file__).resolve().parents[1] / "servers" / "probe_server.py"
BRIDGE_SECRET_VAR = "BRIDGE_TEST_CANARY_SECRET"

HUNT = """
import json, os
from mcp import mcp_servers, runtime, ToolError
needles = [{halves}]
needles = [a + b for a, b in needles]
found = {{}}

def note(where, data):
    text = data.decode("latin-1") if isinstance(data, bytes) else str(data)
    hits = [i for i, needle in enumerate(needles) if needle in text]
    if hits:
        found[where] = hits

note("os.environ", json.dumps(dict(os.environ)))
for pid in os.listdir("/proc"):
    if pid.isdigit():
        for part in ("environ", "cmdline"):
            try:
                note(f"/proc/{{pid}}/{{part}}", open(f"/proc/{{pid}}/{{part}}", "rb").read())
            except OSError:
                pass
with open("/tmp/canary-control", "w") as handle:  # proves the walk would see a canary
    handle.write(needles[0])
scanned = 0
for root, dirs, files in os.walk("/"):
    if root == "/":
        dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev")]
    for name in files:
        path = os.path.join(root, name)
        try:
            if os.path.islink(path) or os.path.getsize(path) > 2_000_000:
                continue
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError:
            continue
        scanned += 1
        note(path, data)
control = found.pop("/tmp/canary-control", None)
os.remove("/tmp/canary-control")
errors = []
for server in ("leaky", "broken"):
    try:
        await mcp_servers[server].crash(status=5, message="going down")
    except ToolError as exc:
        errors.append([server, type(exc).__name__, exc.server])
        note(f"error of {{server}}", repr(exc) + str(exc) + repr(vars(exc)))
note("other.env", json.dumps(await mcp_servers["other"].env()))
note("discovered_servers", json.dumps(runtime.discovered_servers(detailed=True), default=str))
note("query_tool_docs", json.dumps(await runtime.query_tool_docs("keeper"), default=str))
hits = await runtime.search_tool_docs("token env", limit=20)
note("search_tool_docs", json.dumps(hits, default=str))
{{"found": found, "control": control, "scanned": scanned, "errors": errors}}
"""


def _halves(secret: str) -> str:
    middle = len(secret) // 2
    return f"({secret[:middle]!r}, {secret[middle:]!r})"


def _servers(server_secret: str) -> dict[str, Any]:
    probe = [str(PROBE)]
    dump_env = f"env >&2; exec {sys.executable} {PROBE}"
    return {
        # Holds a literal secret in its env.
        "keeper": {
            "command": sys.executable,
            "args": probe,
            "env": {"KEEPER_TOKEN": server_secret},
        },
        # Gets the bridge's secret through ${VAR} expansion and prints its env to stderr at start,
        # so a crash report (which quotes stderr) would carry it.
        "leaky": {
            "command": "/bin/sh",
            "args": ["-c", dump_env],
            "env": {"LEAKY_TOKEN": "${" + BRIDGE_SECRET_VAR + "}"},
        },
        # Prints its env (with a secret) to stderr and fails to start.
        "broken": {
            "command": "/bin/sh",
            # A token on the command line too ($0 of the script): never shown to the sandbox.
            "args": ["-c", "env >&2; exit 3", f"--token={server_secret}"],
            "env": {"BROKEN_TOKEN": server_secret},
        },
        "other": {"command": sys.executable, "args": probe},
    }


def _all_text(result: types.CallToolResult) -> str:
    return json.dumps(result.model_dump(by_alias=True, mode="json"))


async def test_no_canary_is_readable_from_sandbox_env_proc_files_errors_or_other_servers(
    tmp_path: Path, sandbox_image: str
) -> None:
    bridge_secret = "bridge-canary-" + secrets.token_hex(16)
    server_secret = "server-canary-" + secrets.token_hex(16)
    code = HUNT.format(halves=", ".join([_halves(bridge_secret), _halves(server_secret)]))
    env = {BRIDGE_SECRET_VAR: bridge_secret}
    async with open_bridge(tmp_path, servers=_servers(server_secret), env=env) as bridge:
        await bridge.run("await mcp_servers['keeper'].echo(text='started')")  # live, env loaded
        result = await bridge.run(code, timeout=110)
    assert result.is_error is False, result.structured_content
    report = literal_eval(code_text(result))  # a dict literal rendered by repr()
    assert report["found"] == {}
    assert report["control"] == [0]  # the hunt finds a canary where one is
    assert report["scanned"] > 1000  # the walk really read the image's files
    assert report["errors"] == [
        ["leaky", "UpstreamUnavailable", "leaky"],
        ["broken", "UpstreamUnavailable", "broken"],
    ]
    assert bridge_secret not in _all_text(result)
    assert server_secret not in _all_text(result)


async def test_crash_report_quoting_server_env_masks_the_secret_and_names_the_server(
    tmp_path: Path, sandbox_image: str
) -> None:
    bridge_secret = "bridge-canary-" + secrets.token_hex(16)
    server_secret = "server-canary-" + secrets.token_hex(16)
    env = {BRIDGE_SECRET_VAR: bridge_secret}
    async with open_bridge(tmp_path, servers=_servers(server_secret), env=env) as bridge:
        crashed = await bridge.run(
            "print('before', flush=True)\n"
            "await mcp_servers['leaky'].crash(status=4, message='going down')"
        )
        failed = await bridge.run("await mcp_servers['broken'].echo(text='x')")
    for result, server in ((crashed, "leaky"), (failed, "broken")):
        error = result.structured_content["error"]
        assert result.is_error is True
        assert error["type"].endswith("UpstreamUnavailable")
        assert f"'{server}'" in error["message"]
        # The whole message ends the traceback in the code's block: the env dump is quoted there,
        # its value masked.
        assert "_TOKEN=***" in code_text(result)
        assert bridge_secret not in _all_text(result)
        assert server_secret not in _all_text(result)
    assert code_text(crashed).startswith("before\n[traceback]\n")


async def test_stderr_tail_cut_inside_a_secret_does_not_show_its_end(
    tmp_path: Path, sandbox_image: str
) -> None:
    # A crash report keeps only the end of stderr; when the cut falls inside a secret, the part
    # after the cut is no longer a whole secret, and plain replacement would miss it.
    server_secret = "server-canary-" + secrets.token_hex(16)
    shown = 10  # characters of the secret after the cut
    servers = {
        "longline": {
            "command": "/bin/sh",
            # The filler is made by the script: a 3000-letter argument would itself be masked
            # as a secret-looking configured value.
            "args": [
                "-c",
                'head -c 3000 /dev/zero | tr "\\0" p >&2; printf "%s" "$LONG_TOKEN" >&2; '
                f'head -c {2000 - shown} /dev/zero | tr "\\0" e >&2; exit 3',
            ],
            "env": {"LONG_TOKEN": server_secret},
        }
    }
    async with open_bridge(tmp_path, servers=servers) as bridge:
        failed = await bridge.run("await mcp_servers['longline'].echo(text='x')")
    message = code_text(failed)  # the traceback ends with the whole message
    assert "'longline'" in failed.structured_content["error"]["message"]
    assert "e" * 100 in message  # the tail is there
    assert server_secret[-shown:] not in _all_text(failed)


def _token(kind: str) -> str:
    return f"{kind}-{secrets.token_hex(12)}"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # nothing listens on it once the socket is closed


ECHO_BACK = """
from mcp import mcp_servers, runtime, ToolError
report = {"alive": await mcp_servers["argv-alive"].env()}
# Straight `call` frames (no tool listing first), so the failures are audited too.
env_tool = mcp_servers["argv-alive"].env
Tool, registry = type(env_tool), env_tool._registry
for name in ("argv-broken", "remote"):
    try:
        await Tool(name, "echo", registry)(text="x")
    except ToolError as exc:
        report[name] = [type(exc).__name__, str(exc), exc.data]
report["servers"] = runtime.discovered_servers(detailed=True)
report
"""


async def test_secrets_in_arguments_urls_and_headers_never_reach_sandbox_logs_or_audit(
    tmp_path: Path, sandbox_image: str
) -> None:
    # Every form a token takes in a configuration: after `=`, as the next argument, as a URL's
    # password or query value, in a header-like argument, in an HTTP server's path, query and
    # headers, and in env. One server echoes them all back (results), one prints its arguments
    # and fails at start (crash report), one cannot be reached (connection error).
    s = {kind: _token(kind) for kind in ("key", "tok", "pw", "qkey", "bearer", "path", "uq", "hdr")}
    args = [
        f"--api-key={s['key']}",
        "--token",
        s["tok"],
        f"postgresql://app:{s['pw']}@db.example/app",
        f"https://api.example.com/v1/items?key={s['qkey']}&mode=fast",
        "--header",
        f"Authorization: Bearer {s['bearer']}",
    ]
    env_secret = _token("env")
    servers = {
        "argv-alive": {
            "command": sys.executable,
            "args": [str(PROBE), *args],
            "env": {"KEEPER_TOKEN": env_secret, "NODE_ENV": "production"},
        },
        "argv-broken": {
            "command": "/bin/sh",
            "args": ["-c", 'printf "%s\\n" "$@" >&2; exit 3', "sh", *args],
        },
        "remote": {
            "type": "http",
            "url": f"http://127.0.0.1:{_closed_port()}/t/{s['path']}/mcp?api_key={s['uq']}",
            "headers": {"Authorization": f"Bearer {s['hdr']}"},
        },
    }
    log, audit = tmp_path / "bridge.log", tmp_path / "audit.jsonl"
    env = {
        "MCP_BRIDGE_LOG_FILE": str(log),
        "MCP_BRIDGE_LOG_LEVEL": "debug",
        "MCP_BRIDGE_AUDIT_LOG": str(audit),
    }
    async with open_bridge(tmp_path, servers=servers, env=env) as bridge:
        result = await bridge.run(ECHO_BACK, timeout=110)
    assert result.is_error is False, result.structured_content
    seen = _all_text(result)
    logged, audited = log.read_text(), audit.read_text()
    for secret in (*s.values(), env_secret):
        assert secret not in seen
        assert secret not in logged
        assert secret not in audited
    report = literal_eval(code_text(result))
    alive = report["alive"]  # the tool's JSON text, parsed by the sandbox's `mcp` module
    assert alive["env"]["KEEPER_TOKEN"] == "***"
    assert alive["env"]["NODE_ENV"] == "production"  # a plain word is no secret
    assert alive["argv"][1:4] == ["--api-key=***", "--token", "***"]
    kind, message, data = report["argv-broken"]
    assert kind == "UpstreamUnavailable"
    assert "--api-key=***" in message  # the stderr tail is there, masked
    assert "--api-key=***" in data["stderr_tail"]
    kind, message, _ = report["remote"]
    assert kind == "UpstreamUnavailable"
    assert "127.0.0.1" in message
    assert "/t/***/mcp" in message
    # The checks above had something to look at: the servers' stderr was logged line by line,
    # and every call was audited.
    assert "argv-broken stderr: --api-key=***" in logged
    records = [json.loads(line) for line in audited.splitlines()]
    assert [r["outcome"] for r in records] == ["ok", "unavailable", "unavailable"]
    assert "--api-key=***" in records[1]["detail"]
