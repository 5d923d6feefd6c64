"""Real builds and runs of the sandbox images (podman; the first build takes minutes)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from bridge_image import (
    DEFAULT_IMAGE,
    LABEL_INPUTS_HASH,
    LABEL_PROTOCOL_VERSIONS,
    LABEL_REVISION,
    LABEL_SANDBOX_CLIENT_VERSION,
    LABEL_VARIANT,
    SLIM_IMAGE,
    build,
    inputs_hash,
    status,
)
from bridge_image._inputs import find_repo
from bridge_image._wheels import PYTHON_VERSION
from bridge_image.builder import _differences

pytestmark = pytest.mark.container

REPO = find_repo(Path(__file__).parent)
INPUT_PATHS = [
    "images",
    "packages/bridge-protocol",
    "packages/bridge-sandbox-client",
    "packages/bridge-image/src",
]

# The flags the runtime uses for sandboxes (FACTS.md): the image must work under all of them.
HARDENED = [
    "--rm",
    "--network=none",
    "--cap-drop=ALL",
    "--read-only",
    "--read-only-tmpfs=false",
    "--tmpfs=/tmp:rw,size=64m,mode=1777",
    "--security-opt=no-new-privileges",
    "--memory=256m",
    "--pids-limit=64",
]


def _run_python(podman: str, image: str, code: str) -> Any:
    name = f"bridge-image-test-{uuid.uuid4().hex[:12]}"
    done = subprocess.run(
        [podman, "run", f"--name={name}", *HARDENED, "--entrypoint=python", image, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


_LAYOUT_PROBE = """
import json, os, shutil, subprocess, sys
import bridge_protocol, bridge_sandbox_client, cbor2
try:
    open("/opt/bridge/venv/probe", "w")
    venv_writable = True
except OSError:
    venv_writable = False
with open("/tmp/probe", "w") as f:
    f.write("ok")
print(json.dumps({
    "uid": os.getuid(), "gid": os.getgid(), "home": os.environ["HOME"],
    "prefix": sys.prefix, "version": list(sys.version_info[:2]),
    "venv_owner": os.stat("/opt/bridge/venv").st_uid, "venv_writable": venv_writable,
    "channel_dir": os.listdir("/run/bridge"),
    "tools": {t: bool(shutil.which(t)) for t in ("jq", "git", "ls", "sha256sum", "tar")},
    "jq": subprocess.run(["jq", "-c", ".a"], input='{"a":[1]}', capture_output=True,
                         text=True).stdout.strip(),
    "cbor": cbor2.loads(cbor2.dumps({"k": 1})),
    "no_bytecode": os.environ.get("PYTHONDONTWRITEBYTECODE"),
    "mplconfig": os.environ.get("MPLCONFIGDIR"),
}))
"""


@pytest.fixture(scope="module")
def base_image(podman: str, offline: bool) -> str:
    result = build("slim", offline=offline, if_stale=True)
    assert result.tag == SLIM_IMAGE
    return result.tag


def test_base_image_carries_versions_revision_and_current_inputs_hash(
    base_image: str, offline: bool
) -> None:
    found = status("slim", offline=offline)
    assert found.present
    assert found.labels[LABEL_VARIANT] == "slim"
    assert found.labels[LABEL_PROTOCOL_VERSIONS] == "1,2"
    assert found.labels[LABEL_SANDBOX_CLIENT_VERSION] == "0.1.0"
    assert found.labels[LABEL_REVISION] not in ("", "unknown")
    assert found.labels[LABEL_INPUTS_HASH] == inputs_hash("slim", offline=offline)


def test_base_image_runs_as_nobody_with_a_read_only_venv_tools_and_the_client(
    podman: str, base_image: str
) -> None:
    probe = _run_python(podman, base_image, _LAYOUT_PROBE)
    assert probe["uid"] == 65534
    assert probe["gid"] == 65534
    assert probe["home"] == "/tmp"
    assert probe["prefix"] == "/opt/bridge/venv"
    assert probe["version"] == [int(n) for n in PYTHON_VERSION.split(".")]
    assert probe["venv_owner"] == 0
    assert probe["venv_writable"] is False
    assert probe["channel_dir"] == []
    assert probe["tools"] == dict.fromkeys(("jq", "git", "ls", "sha256sum", "tar"), True)
    assert probe["jq"] == "[1]"
    assert probe["cbor"] == {"k": 1}
    assert probe["no_bytecode"] == "1"
    assert probe["mplconfig"] == "/tmp/.matplotlib"


def test_base_image_starts_the_sandbox_client_as_its_entry_point(
    podman: str, base_image: str
) -> None:
    done = subprocess.run(
        [podman, "image", "inspect", "--format", "{{json .Config.Entrypoint}}", base_image],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout) == ["/opt/bridge/venv/bin/python", "-m", "bridge_sandbox_client"]


def test_the_documented_custom_image_adds_a_package_from_a_local_wheel(
    podman: str, base_image: str, tmp_path: Path
) -> None:
    # A user's package, built into a wheel here so the test needs no index.
    project = tmp_path / "project"
    (project / "src/sandbox_extra").mkdir(parents=True)
    (project / "src/sandbox_extra/__init__.py").write_text("ANSWER = 42\n")
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'
        '[project]\nname = "sandbox-extra"\nversion = "1.0"\n'
        '[tool.hatch.build.targets.wheel]\npackages = ["src/sandbox_extra"]\n'
    )
    context = tmp_path / "context"
    shutil.copytree(REPO / "images/examples/custom", context)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--wheel-dir",
            str(context / "wheels"),
            str(project),
        ],
        capture_output=True,
        check=True,
    )
    tag = f"localhost/bridge-image-test-custom:{uuid.uuid4().hex[:12]}"
    try:
        subprocess.run(
            [
                podman,
                "build",
                "--network=none",
                "--pull=never",
                f"--tag={tag}",
                "--build-arg=PIP_ARGS=--no-index --find-links /ctx/wheels sandbox-extra",
                str(context),
            ],
            capture_output=True,
            check=True,
            timeout=600,
        )
        probe = _run_python(
            podman,
            tag,
            "import json, os, sandbox_extra\n"
            "print(json.dumps([sandbox_extra.ANSWER, os.getuid()]))",
        )
        assert probe == [42, 65534]
    finally:
        subprocess.run([podman, "rmi", "--force", tag], capture_output=True, check=False)


def test_labels_follow_the_inputs_even_when_every_layer_comes_from_the_cache(
    podman: str, base_image: str, offline: bool, tmp_path: Path
) -> None:
    # A builder-only change alters the inputs hash but no layer: buildah then reuses every
    # cached step, and a label fed from a build arg would silently keep the old value.
    for path in INPUT_PATHS:
        shutil.copytree(REPO / path, tmp_path / path, ignore=shutil.ignore_patterns("tests"))
    tag = f"localhost/bridge-image-test-labels:{uuid.uuid4().hex[:12]}"
    try:
        first = build("slim", offline=offline, tag=tag, repo=tmp_path)
        names = tmp_path / "packages/bridge-image/src/bridge_image/names.py"
        names.write_text(names.read_text() + "\n# a builder-only change\n")
        second = build("slim", offline=offline, tag=tag, repo=tmp_path)
        assert second.layers == first.layers
        assert second.labels[LABEL_INPUTS_HASH] != first.labels[LABEL_INPUTS_HASH]
        assert second.labels[LABEL_INPUTS_HASH] == inputs_hash(
            "slim", offline=offline, repo=tmp_path
        )
    finally:
        subprocess.run([podman, "rmi", "--force", tag], capture_output=True, check=False)


@pytest.mark.slow
def test_two_builds_from_the_same_inputs_give_the_same_digest(
    podman: str, base_image: str, offline: bool, tmp_path: Path
) -> None:
    # A frozen copy of the inputs: the working tree may change between two long builds.
    for path in INPUT_PATHS:
        shutil.copytree(REPO / path, tmp_path / path, ignore=shutil.ignore_patterns("tests"))
    tags = [f"localhost/bridge-image-test-repro:{uuid.uuid4().hex[:12]}" for _ in range(4)]
    try:
        first = build("slim", offline=offline, no_cache=True, tag=tags[0], repo=tmp_path)
        second = build("slim", offline=offline, no_cache=True, tag=tags[1], repo=tmp_path)
        assert second.image_id == first.image_id, _differences(first, second)
        assert second.digest == first.digest

        # New labels on cached layers must give what a build from scratch gives.
        names = tmp_path / "packages/bridge-image/src/bridge_image/names.py"
        names.write_text(names.read_text() + "\n# a builder-only change\n")
        cached = build("slim", offline=offline, tag=tags[2], repo=tmp_path)
        scratch = build("slim", offline=offline, no_cache=True, tag=tags[3], repo=tmp_path)
        assert cached.layers == first.layers
        assert scratch.image_id == cached.image_id, _differences(cached, scratch)
    finally:
        for tag in tags:
            subprocess.run([podman, "rmi", tag], capture_output=True, check=False)


@pytest.mark.slow
def test_standard_image_plots_with_pandas_as_nobody(
    podman: str, base_image: str, offline: bool
) -> None:
    result = build("standard", offline=offline, if_stale=True)
    assert result.tag == DEFAULT_IMAGE
    probe = _run_python(
        podman,
        result.tag,
        "import json, os, pandas as pd, matplotlib.pyplot as plt\n"
        "df = pd.DataFrame({'month': [1, 1, 2], 'revenue': [3, 4, 5]})\n"
        "plt.plot(df.groupby('month')['revenue'].sum()); plt.savefig('/tmp/p.png')\n"
        "print(json.dumps([os.getuid(), os.path.getsize('/tmp/p.png') > 1000]))",
    )
    assert probe == [65534, True]
