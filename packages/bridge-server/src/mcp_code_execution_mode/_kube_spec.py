"""``kube-spec``: print the Kubernetes documents a sandbox would be submitted as (no cluster
client: see :mod:`bridge_core.runtime.kube`), built from the same settings as every sandbox."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

from bridge_core.private_files import write_private
from bridge_core.runtime._seccomp import SeccompUnavailable, sandbox_profile
from bridge_core.runtime.base import SandboxSpec
from bridge_core.runtime.kube import SECCOMP_LOCALHOST_PROFILE, sandbox_manifests, to_yaml

from mcp_code_execution_mode._compose import session_config
from mcp_code_execution_mode.settings import Settings

__all__ = ["run_kube_spec"]


def run_kube_spec(
    settings: Settings,
    *,
    pod_name: str,
    seccomp_dir: str | None,
    command: Sequence[str],
) -> int:
    """Print the Pod and its NetworkPolicy as YAML; with ``seccomp_dir``, write the sandbox's
    seccomp profile there under the name the Pod refers to. Returns the exit status."""
    config = session_config(settings)
    spec = SandboxSpec(
        name=pod_name,
        image=config.image,
        limits=config.limits,
        security_opt=config.security_opt,
    )
    if seccomp_dir is not None:
        try:
            profile, _ = sandbox_profile()
        except SeccompUnavailable as exc:
            print(f"mcp-code-execution-mode kube-spec: {exc}", file=sys.stderr)
            return 2
        target = Path(seccomp_dir) / SECCOMP_LOCALHOST_PROFILE
        Path(seccomp_dir).mkdir(parents=True, exist_ok=True)
        write_private(target, json.dumps(profile, indent=1).encode())
        print(f"seccomp profile written to {target}", file=sys.stderr)
    documents = sandbox_manifests(spec, pod_name=pod_name, command=list(command) or None)
    sys.stdout.write(to_yaml(documents))
    return 0
