"""The containers trust configuration of one push or pull, written into a private directory.

Nothing on the host is read or changed: the policy (``signedBy`` the release key, everything
else rejected) and the lookaside location of the signatures go to skopeo as explicit
``--policy`` and ``--registries.d`` arguments, so a pull verifies the release's signature
whatever ``/etc/containers/policy.json`` (often ``insecureAcceptAnything``) says.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass
from pathlib import Path

__all__ = ["TrustFiles", "tls_verify", "write_trust"]


@dataclass(frozen=True, slots=True)
class TrustFiles:
    policy: Path
    registries_d: Path

    def arguments(self) -> list[str]:
        return [f"--policy={self.policy}", f"--registries.d={self.registries_d}"]


def write_trust(
    directory: Path,
    repositories: list[str],
    *,
    public_key: str | None,
    lookaside: str,
    staging: str | None = None,
) -> TrustFiles:
    """Write ``policy.json`` and ``registries.d/`` for ``repositories`` under ``directory``.

    ``public_key`` (armored) None: a push, where the policy only has to let the local source
    through; otherwise every repository requires a signature by that key and anything else is
    rejected. ``staging``: where a push writes signatures (default: ``lookaside``).
    """
    registries_d = directory / "registries.d"
    registries_d.mkdir(parents=True, exist_ok=True)
    places = {"lookaside": lookaside}
    if staging or public_key is None:
        places["lookaside-staging"] = staging or lookaside
    # JSON is YAML: one entry per repository, nothing else.
    (registries_d / "release.yaml").write_text(
        json.dumps({"docker": dict.fromkeys(repositories, places)}, indent=2) + "\n"
    )
    if public_key is None:
        policy: dict[str, object] = {
            "default": [{"type": "reject"}],
            "transports": {"containers-storage": {"": [{"type": "insecureAcceptAnything"}]}},
        }
    else:
        key = directory / "release-key.asc"
        key.write_text(public_key)
        required = [{"type": "signedBy", "keyType": "GPGKeys", "keyPath": str(key)}]
        policy = {
            "default": [{"type": "reject"}],
            "transports": {"docker": dict.fromkeys(repositories, required)},
        }
    (directory / "policy.json").write_text(json.dumps(policy, indent=2) + "\n")
    return TrustFiles(directory / "policy.json", registries_d)


def tls_verify(reference: str) -> bool:
    """False only for a registry on the loopback interface (a local test or mirror registry
    served over plain HTTP); every other registry is reached over verified TLS."""
    host = reference.split("/", 1)[0]
    if host.startswith("["):
        host = host[1 : host.find("]")]
    elif host.count(":") == 1:
        host = host.split(":", 1)[0]
    if host == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True
