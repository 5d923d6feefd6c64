"""The Pod ``kube-spec`` prints, run as it is by ``podman kube play``, hardened from inside.

No Kubernetes server can run here; podman plays the same YAML. What the pod's own process sees
is checked: no capabilities, no_new_privs, our seccomp filter (not the runtime's default: a
namespace and an AF_VSOCK socket are refused), uid 65534, a read-only root, only ``lo``.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

pytestmark = [pytest.mark.container, pytest.mark.anyio]

# Printed by the pod's process: what it is allowed, measured from inside.
CHECK = """import json, os, socket
lines = open('/proc/self/status').read().splitlines()
status = dict(line.split(':\\t', 1) for line in lines if ':\\t' in line)
keys = ('CapEff', 'CapBnd', 'NoNewPrivs', 'Seccomp', 'Uid', 'Gid')
seen = {k: status[k].split()[0] for k in keys}
def errno_of(action):
    try:
        action()
    except OSError as exc:
        return exc.errno
    return 0
seen['write_root'] = errno_of(lambda: open('/etc/escaped', 'w'))
seen['vsock'] = errno_of(lambda: socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM))
seen['userns'] = errno_of(lambda: os.unshare(os.CLONE_NEWUSER))
seen['interfaces'] = sorted(os.listdir('/sys/class/net'))
seen['write_tmp'] = errno_of(lambda: open('/tmp/ok', 'w').write('x'))
print(json.dumps(seen))"""


INSPECTED = "{{.HostConfig.Memory}} {{.HostConfig.CpuQuota}} {{.HostConfig.ReadonlyRootfs}}"


async def _run(*command: str) -> subprocess.CompletedProcess[bytes]:
    with anyio.fail_after(120):
        return await anyio.run_process(list(command), check=False)


async def test_kube_spec_pod_runs_under_podman_kube_play_with_every_hardening_in_effect(
    tmp_path: Path, sandbox_image: str
) -> None:
    pod = f"mcp-kube-test-{secrets.token_hex(4)}"
    seccomp_root = tmp_path / "seccomp"
    env = {**os.environ, "MCP_BRIDGE_IMAGE": sandbox_image, "MCP_BRIDGE_CPU_QUOTA": "50000"}
    with anyio.fail_after(60):
        printed = await anyio.run_process(
            [sys.executable, "-m", "mcp_code_execution_mode", "kube-spec", "--pod-name", pod,
             "--seccomp-dir", str(seccomp_root), "--", "/opt/bridge/venv/bin/python", "-c",
             CHECK],
            env=env,
        )  # fmt: skip
    manifest = tmp_path / "sandbox.yaml"
    manifest.write_bytes(printed.stdout)
    text = printed.stdout.decode()
    for declared in (
        "automountServiceAccountToken: false",
        "hostNetwork: false",
        "readOnlyRootFilesystem: true",
        "allowPrivilegeEscalation: false",
        'type: "Localhost"',
        'medium: "Memory"',
        'kind: "NetworkPolicy"',
        'cpu: "500m"',
    ):
        assert declared in text, declared
    try:
        # The NetworkPolicy is a Kubernetes object podman skips: --network none stands for it.
        played = await _run(
            "podman", "kube", "play", "--network", "none",
            "--seccomp-profile-root", str(seccomp_root), str(manifest),
        )  # fmt: skip
        assert played.returncode == 0, played.stderr.decode()
        container = f"{pod}-sandbox"
        await _run("podman", "wait", container)
        logs = await _run("podman", "logs", container)
        seen = json.loads(logs.stdout.decode().strip().splitlines()[-1])
        inspect = await _run(
            "podman", "inspect", container,
            "--format", INSPECTED,
        )  # fmt: skip
    finally:
        await _run("podman", "kube", "down", str(manifest))
    assert seen["CapEff"] == seen["CapBnd"] == "0000000000000000"
    assert seen["NoNewPrivs"] == "1"
    assert seen["Seccomp"] == "2"
    assert seen["Uid"] == seen["Gid"] == "65534"
    assert seen["write_root"] == 30  # EROFS
    assert seen["vsock"] == 97  # EAFNOSUPPORT: the bridge's filter, not the runtime default
    assert seen["userns"] == 1  # EPERM
    assert seen["interfaces"] == ["lo"]
    assert seen["write_tmp"] == 0
    assert inspect.stdout.decode().split() == [str(512 * 1024 * 1024), "50000", "true"]
