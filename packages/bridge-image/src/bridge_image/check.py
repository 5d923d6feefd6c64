"""``bridge-image verify --image NAME``: does an image (a custom one) still carry an intact
sandbox client that speaks this bridge's protocol?

The image's own Python is run once, hardened (no network, read-only, no capabilities, the
sandbox user), to hash every file pip recorded for the sandbox client and the protocol
distributions against their wheels' ``RECORD`` and to report the protocol versions the code
really speaks. A custom image that replaced, edited or removed a file of either, or installed a
client of another protocol, fails with the files and versions named.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field

from bridge_image._inputs import find_repo
from bridge_image._recipes import protocol_versions
from bridge_image._run import image_inspect, require_tool
from bridge_image.errors import IncompatibleImage, MissingInput
from bridge_image.names import LABEL_PROTOCOL_VERSIONS

__all__ = ["ImageCheck", "check_image"]

_DISTRIBUTIONS = ("mcp-bridge-sandbox-client", "mcp-bridge-protocol")
_MAX_OUTPUT = 256 * 1024
_TIMEOUT = 120.0

# Runs inside the image; prints one JSON object. Only the standard library.
_PROBE = r"""
import base64, hashlib, importlib.metadata as md, json, sys
out = {"distributions": {}, "python": sys.version.split()[0]}
for name in sys.argv[1:]:
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        out["distributions"][name] = None
        continue
    changed, missing, checked = [], [], 0
    for f in dist.files or ():
        if f.hash is None or f.hash.mode != "sha256":
            continue
        try:
            data = f.locate().read_bytes()
        except OSError:
            missing.append(str(f))
            continue
        got = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        checked += 1
        if got != f.hash.value:
            changed.append(str(f))
    out["distributions"][name] = {
        "version": dist.version, "checked": checked, "changed": changed, "missing": missing}
try:
    from bridge_protocol.versions import SUPPORTED_VERSIONS
    out["protocol"] = list(SUPPORTED_VERSIONS)
except Exception as exc:
    out["protocol_error"] = repr(exc)[:300]
print(json.dumps(out))
"""


@dataclass(frozen=True, slots=True)
class ImageCheck:
    image: str
    client_version: str
    protocol: tuple[int, ...]
    files_checked: int
    problems: list[str] = field(default_factory=list)


def _probe(podman: str, image: str, python: str) -> dict[str, object]:
    argv = [
        podman, "run", "--rm", "--network=none", "--read-only", "--cap-drop=ALL",
        "--security-opt=no-new-privileges", "--user=65534:65534", "--pull=never",
        f"--entrypoint={python}", image, "-I", "-c", _PROBE, *_DISTRIBUTIONS,
    ]  # fmt: skip
    try:
        done = subprocess.run(argv, capture_output=True, timeout=_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        raise IncompatibleImage(f"{image}: its Python gave no answer in {_TIMEOUT:g} s") from None
    text = done.stdout[-_MAX_OUTPUT:].decode(errors="replace").strip().splitlines()
    try:
        found = json.loads(text[-1]) if done.returncode == 0 and text else None
    except ValueError:
        found = None
    if not isinstance(found, dict):
        detail = done.stderr[-600:].decode(errors="replace").strip()
        raise IncompatibleImage(
            f"{image}: cannot run its sandbox Python {python} (exit {done.returncode}): {detail}"
        )
    return found


def check_image(image: str, *, expected: tuple[int, ...] | None = None) -> ImageCheck:
    """Check ``image``; raise :class:`IncompatibleImage` naming every problem found.

    ``expected``: the protocol versions of this bridge (default: those of the recipe installed
    with this package, which is the protocol of the same release).
    """
    podman = require_tool("podman", "install podman (apt-get install podman)")
    found = image_inspect(podman, image)
    if found is None:
        raise MissingInput(f"{image} is not in podman's image store")
    config = found.get("Config") or {}
    entrypoint = list(config.get("Entrypoint") or [])
    if not entrypoint or entrypoint[-2:] != ["-m", "bridge_sandbox_client"]:
        raise IncompatibleImage(
            f"{image}: its entry point is {entrypoint[:4]}, not `python -m bridge_sandbox_client`:"
            " build it FROM the sandbox image and keep its ENTRYPOINT"
        )
    ours = expected or tuple(int(v) for v in protocol_versions(find_repo()).split(","))
    probe = _probe(podman, image, str(entrypoint[0]))
    problems: list[str] = []
    checked = 0
    distributions = probe.get("distributions")
    client_version = "?"
    for name in _DISTRIBUTIONS:
        dist = distributions.get(name) if isinstance(distributions, dict) else None
        if not isinstance(dist, dict):
            problems.append(f"{name} is not installed in the image's Python")
            continue
        if name == _DISTRIBUTIONS[0]:
            client_version = str(dist.get("version", "?"))[:40]
        checked += int(dist.get("checked") or 0)
        for kind in ("changed", "missing"):
            files = [str(f)[:120] for f in dist.get(kind) or []]
            if files:
                shown = ", ".join(files[:5]) + (f" (+{len(files) - 5})" if len(files) > 5 else "")
                problems.append(f"{name}: {len(files)} file(s) {kind} since install: {shown}")
    raw = probe.get("protocol")
    protocol = tuple(v for v in raw if isinstance(v, int)) if isinstance(raw, list) else ()
    if not protocol:
        error = str(probe.get("protocol_error"))[:300]
        problems.append(f"the protocol cannot be imported: {error}")
    elif not set(protocol) & set(ours):
        side = "newer" if min(protocol) > max(ours) else "older"
        problems.append(
            f"its sandbox client speaks protocol {list(protocol)}, this bridge speaks "
            f"{list(ours)}: the image's client is {side} than this release; rebuild it FROM the "
            "base released with this bridge (mcp-code-execution-mode image base)"
        )
    label = str((found.get("Labels") or {}).get(LABEL_PROTOCOL_VERSIONS, ""))
    if protocol and label and label != ",".join(map(str, sorted(protocol))):
        problems.append(
            f"its label {LABEL_PROTOCOL_VERSIONS}={label[:40]} does not match the protocol its "
            f"code speaks ({list(protocol)})"
        )
    if problems:
        listed = "\n  ".join(problems)
        raise IncompatibleImage(f"{image} is not a usable sandbox image:\n  {listed}")
    return ImageCheck(image, client_version, protocol, checked, problems)
