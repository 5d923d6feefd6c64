"""The system-call filter of podman sandboxes: podman's default without the kernel keyring calls.

The kernel's key store is not namespaced. Without a user namespace every sandbox runs as host uid
65534, so the user keyring ``@u`` of that uid is ONE object shared by all sandboxes (and any host
process running as nobody). podman's default profile (containers-common) allows ``keyctl``:
sandbox code could link a keyring whose name carries data into ``@u``, and another session read it
back (measured; ``integration-tests/battery/test_hostile_escape.py``). Docker's default profile
already refuses all three calls. The profile written here is podman's own default with those
calls removed from every allow rule and refused explicitly with ENOSYS, like any call the default
does not know.
"""

from __future__ import annotations

import errno
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bridge_core.private_files import private_dir, write_private

__all__ = ["DEFAULT_PROFILES", "KEYRING_SYSCALLS", "PROFILE_NAME", "keyring_free_profile"]

DEFAULT_PROFILES = (
    Path("/etc/containers/seccomp.json"),  # an administrator's override comes first, as in podman
    Path("/usr/share/containers/seccomp.json"),
)
KEYRING_SYSCALLS = ("add_key", "keyctl", "request_key")
PROFILE_NAME = "seccomp-no-keyring.json"


def keyring_free_profile(
    state_dir: Path, sources: Sequence[Path] = DEFAULT_PROFILES
) -> Path | None:
    """Write the default profile minus the keyring calls to ``state_dir``; return its path.

    The file is 0600 in a private directory: podman reads it as root or as this same user.

    ``None`` when no default profile is readable here (e.g. podman on another machine): the
    runtime's own default then applies unchanged.
    """
    for source in sources:
        try:
            profile: dict[str, Any] = json.loads(source.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(profile, dict) and isinstance(profile.get("syscalls"), list):
            break
    else:
        return None
    rules = []
    for rule in profile["syscalls"]:
        if isinstance(rule, dict) and rule.get("action") == "SCMP_ACT_ALLOW":
            names = [name for name in rule.get("names", []) if name not in KEYRING_SYSCALLS]
            if not names:
                continue
            rule = {**rule, "names": names}
        rules.append(rule)
    rules.append(
        {"names": list(KEYRING_SYSCALLS), "action": "SCMP_ACT_ERRNO", "errnoRet": errno.ENOSYS}
    )
    target = state_dir / PROFILE_NAME
    private_dir(state_dir)
    write_private(target, json.dumps({**profile, "syscalls": rules}).encode())
    return target
