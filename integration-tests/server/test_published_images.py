"""Published sandbox images against a real registry (Debian's ``docker-registry``, the reference
distribution registry) on localhost, with real podman, skopeo and GPG signatures.

Each module run starts its own registry (own port, storage and config) and its own signing key,
publishes an image made for this run (the slim image plus a layer of its own, so the pull really
moves a layer) under test-only names, and removes those names afterwards: the shared images of
the machine are only read.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from bridge_image.names import SLIM_IMAGE
from bridge_image.publish import publish
from bridge_image.pull import pull_released
from bridge_image.release import Release, load_release, write_release
from bridge_protocol.versions import SUPPORTED_VERSIONS

from .conftest import bridge_text, code_text, open_bridge

pytestmark = pytest.mark.container

_shared = __import__("importlib").import_module("integration-tests.conftest")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _podman_only() -> None:
    """Released images are pulled with podman only (docs/decisions/0054, image signatures): a
    docker engine never pulls them, so nothing here exists there."""
    if _shared.TEST_RUNTIME != "podman":
        pytest.skip(
            "the bridge pulls released images only with podman; docker gets its images by "
            "hand (docs/decisions/0054)"
        )


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        _shared.require_runtime(f"{name} is not installed (scripts/prepare-registry installs it)")
    return str(found)


def _podman(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["podman", *args], capture_output=True, text=True, check=check)


def _drop(*names: str) -> None:
    """Remove these names only (an image also tagged otherwise keeps its other names)."""
    for name in names:
        _podman("rmi", name, check=False)


@dataclass(frozen=True)
class Registry:
    host: str
    """``127.0.0.1:PORT``"""
    storage: Path
    sigs: Path

    @property
    def lookaside(self) -> str:
        return self.sigs.as_uri()


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    binary = _tool("docker-registry")
    _tool("skopeo")
    root = tmp_path_factory.mktemp("registry")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = root / "config.yml"
    config.write_text(
        "version: 0.1\nlog: {level: info}\n"
        f"storage: {{filesystem: {{rootdirectory: {root / 'storage'}}}}}\n"
        f"http: {{addr: 127.0.0.1:{port}}}\n"
    )
    process = subprocess.Popen(
        [binary, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    assert process.stderr is not None
    log = root / "registry.log"
    with log.open("w") as out:
        for line in process.stderr:  # until it listens (or exits: then the loop ends)
            out.write(line)
            if "listening on" in line:
                break
    if process.poll() is not None:
        pytest.fail(f"docker-registry exited: {log.read_text()[-2000:]}")

    def drain() -> None:  # a full pipe would block the registry's logging
        with log.open("a") as out:
            for line in process.stderr or ():
                out.write(line)

    threading.Thread(target=drain, daemon=True).start()
    try:
        yield Registry(f"127.0.0.1:{port}", root / "storage", root / "sigs")
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def signing_key(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    gpg = _tool("gpg")
    home = tmp_path_factory.mktemp("gnupg")
    home.chmod(0o700)
    previous = os.environ.get("GNUPGHOME")
    os.environ["GNUPGHOME"] = str(home)
    subprocess.run(
        [gpg, "--batch", "--passphrase", "", "--quick-gen-key",
         "Release Test <release@example.invalid>", "ed25519", "sign", "never"],
        capture_output=True, check=True,
    )  # fmt: skip
    listed = subprocess.run(
        [gpg, "--batch", "--with-colons", "--list-secret-keys"], capture_output=True, text=True
    )
    fingerprint = re.search(r"^fpr:+([0-9A-F]{40}):", listed.stdout, re.M)
    assert fingerprint is not None
    try:
        yield fingerprint[1]
    finally:
        subprocess.run(["gpgconf", "--kill", "all"], env=os.environ, capture_output=True)
        if previous is None:
            os.environ.pop("GNUPGHOME", None)
        else:
            os.environ["GNUPGHOME"] = previous


def _base_image() -> str:
    base = os.environ.get("MCP_BRIDGE_SLIM_IMAGE") or SLIM_IMAGE
    if _podman("image", "exists", base, check=False).returncode != 0:
        _shared.require_runtime(f"the slim image {base} is not built (scripts/prepare-host)")
    return base


def _derived_image(work: Path, marker: str) -> str:
    """The slim image plus a file holding ``marker``: an image (and a layer) of this run."""
    context = work / f"context-{marker}"
    context.mkdir(parents=True)
    (context / "marker").write_text(marker)
    (context / "Containerfile").write_text(f"FROM {_base_image()}\nCOPY marker /marker\n")
    tag = f"localhost/mcp-bridge-registry-test:{marker}"
    _podman("build", "--pull=never", "--network=none", f"--tag={tag}", str(context))
    return tag


@dataclass(frozen=True)
class Published:
    local: str
    marker: str
    record: Path
    release: Release


def _publish(
    registry: Registry, work: Path, namespace: str, sign_by: str | None, marker: str | None = None
) -> Published:
    marker = marker or uuid.uuid4().hex[:12]
    local = _derived_image(work, marker)
    record = work / f"release-{namespace}-{marker}.json"
    release = publish(
        ["slim"],
        registry=f"{registry.host}/{namespace}",
        sign_by=sign_by,
        lookaside=registry.lookaside,
        tags={"slim": local},
        build=False,
        record=record,
    )
    return Published(local, marker, record, release)


def _names_of(published: Published) -> tuple[str, ...]:
    return (published.local, *(p.reference for p in published.release.images.values()))


@pytest.fixture(scope="module")
def published(
    registry: Registry, signing_key: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Published]:
    done = _publish(registry, tmp_path_factory.mktemp("published"), "release", signing_key)
    try:
        yield done
    finally:
        _drop(*_names_of(done))


def _digests(name: str) -> set[str]:
    found = _podman("image", "inspect", "--format", "{{json .RepoDigests}}", name, check=False)
    return set(__import__("json").loads(found.stdout)) if found.returncode == 0 else set()


async def test_first_run_python_pulls_the_released_image_by_digest_and_works(
    published: Published, tmp_path: Path
) -> None:
    image = published.release.images[published.local]
    assert load_release(published.record) == published.release
    _drop(*_names_of(published))  # published, then gone from this machine
    assert _podman("image", "exists", published.local, check=False).returncode != 0
    env = {"MCP_BRIDGE_IMAGE": published.local, "MCP_BRIDGE_IMAGE_RELEASE": str(published.record)}
    async with open_bridge(tmp_path, env=env) as bridge:
        result = await bridge.run("print(open('/marker').read())")
    assert result.is_error is False, bridge_text(result)
    assert code_text(result).strip() == published.marker
    assert image.pinned in _digests(published.local)


def test_doctor_pulls_the_missing_image_with_progress(published: Published, tmp_path: Path) -> None:
    _drop(*_names_of(published))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MCP_BRIDGE_")},
        "MCP_BRIDGE_IMAGE": published.local,
        "MCP_BRIDGE_IMAGE_RELEASE": str(published.record),
        "MCP_BRIDGE_DISCOVER": "false",
        "MCP_BRIDGE_STATE_DIR": str(tmp_path / "state"),
    }
    done = subprocess.run(
        [__import__("sys").executable, "-m", "mcp_code_execution_mode", "doctor"],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    pinned = published.release.images[published.local].pinned
    assert f"[ok]   image pull: pulled {pinned}" in done.stdout, done.stdout + done.stderr
    assert "Writing manifest" in done.stdout  # skopeo's progress, shown as it comes
    assert pinned in _digests(published.local)


def test_an_unsigned_image_is_refused_when_signatures_are_required(
    registry: Registry, signing_key: str, published: Published, tmp_path: Path
) -> None:
    unsigned = _publish(registry, tmp_path, "unsigned", sign_by=None)
    try:
        assert unsigned.release.signature is None
        # The same release key as the real release: only the signature is missing.
        claimed = replace(unsigned.release, signature=published.release.signature)
        _drop(*_names_of(unsigned))
        with pytest.raises(Exception, match="NOT signed") as refused:
            pull_released(unsigned.local, claimed)
        assert "nothing was tagged" in str(refused.value)
        assert _podman("image", "exists", unsigned.local, check=False).returncode != 0
        # And a record without a key is never pulled from at all.
        with pytest.raises(Exception, match="names no signing key"):
            pull_released(unsigned.local, unsigned.release)
    finally:
        _drop(*_names_of(unsigned))


def test_another_image_under_the_same_tag_with_a_copied_signature_is_refused(
    registry: Registry, signing_key: str, published: Published, tmp_path: Path
) -> None:
    first = _publish(registry, tmp_path, "moved", signing_key)
    # An attacker pushes another image under the same tag and puts the genuine signature of the
    # first next to it: the signature names the first digest, so it does not cover the second.
    second = _publish(registry, tmp_path, "moved", sign_by=None)
    try:
        (one,) = first.release.images.values()
        (two,) = second.release.images.values()
        assert one.reference == two.reference
        assert one.digest != two.digest
        source = registry.sigs / "moved" / f"mcp-bridge-sandbox-slim@{one.digest.replace(':', '=')}"
        target = source.with_name(f"mcp-bridge-sandbox-slim@{two.digest.replace(':', '=')}")
        shutil.copytree(source, target)
        tampered = replace(second.release, signature=first.release.signature)
        _drop(*_names_of(first), *_names_of(second))
        with pytest.raises(Exception, match=r"does not match|not by the release key"):
            pull_released(second.local, tampered)
        assert _podman("image", "exists", second.local, check=False).returncode != 0
        # The release pins the first digest: moving the tag changes nothing it pulls.
        pulled = pull_released(first.local, first.release)
        assert pulled.published.pinned in _digests(first.local)
    finally:
        _drop(*_names_of(first), *_names_of(second))


async def test_a_manifest_tampered_in_the_registry_is_refused_and_nothing_runs(
    registry: Registry, signing_key: str, tmp_path: Path
) -> None:
    victim = _publish(registry, tmp_path, "tampered", signing_key)
    try:
        (image,) = victim.release.images.values()
        hexdigest = image.digest.removeprefix("sha256:")
        blobs = registry.storage / "docker/registry/v2/blobs/sha256"
        blob = blobs / hexdigest[:2] / hexdigest / "data"
        blob.write_bytes(blob.read_bytes() + b"\n")  # still a valid manifest, another digest
        _drop(*_names_of(victim))
        env = {"MCP_BRIDGE_IMAGE": victim.local, "MCP_BRIDGE_IMAGE_RELEASE": str(victim.record)}
        async with open_bridge(tmp_path / "bridge", env=env) as bridge:
            result = await bridge.run("print('must not run')")
        assert result.is_error is True
        text = bridge_text(result) or code_text(result)
        assert "refused" in text, text
        assert image.pinned in text
        assert "must not run" not in code_text(result)
        assert _podman("image", "exists", victim.local, check=False).returncode != 0
    finally:
        _drop(*_names_of(victim))


def _image_id(name: str) -> str:
    found = _podman("image", "inspect", "--format", "{{.Id}}", name, check=False)
    return f"sha256:{found.stdout.strip()}" if found.returncode == 0 else ""


def _impostor(published: Published, work: Path) -> str:
    """Another image of this run tagged with the released name (published's own names gone):
    what a stale build, a mistaken ``podman tag`` or a planted image leaves behind."""
    _drop(*_names_of(published))
    other = _derived_image(work, f"impostor-{uuid.uuid4().hex[:8]}")
    _podman("tag", other, published.local)
    _drop(other)  # the impostor now has the released name only
    return _image_id(published.local)


async def test_another_image_under_the_released_name_is_replaced_by_the_verified_pull(
    published: Published, tmp_path: Path
) -> None:
    impostor = _impostor(published, tmp_path)
    image = published.release.images[published.local]
    assert image.config is not None
    assert impostor not in {"", image.config}
    env = {"MCP_BRIDGE_IMAGE": published.local, "MCP_BRIDGE_IMAGE_RELEASE": str(published.record)}
    try:
        async with open_bridge(tmp_path / "bridge", env=env) as bridge:
            result = await bridge.run("print(open('/marker').read())")
        assert result.is_error is False, bridge_text(result)
        # The released image ran, not the one that held its name.
        assert code_text(result).strip() == published.marker
        assert image.pinned in _digests(published.local)
        assert _image_id(published.local) == image.config
    finally:
        _podman("rmi", impostor.removeprefix("sha256:"), check=False)


async def test_with_pulls_off_another_image_under_the_released_name_is_refused_naming_both(
    published: Published, tmp_path: Path
) -> None:
    impostor = _impostor(published, tmp_path)
    image = published.release.images[published.local]
    env = {
        "MCP_BRIDGE_IMAGE": published.local,
        "MCP_BRIDGE_IMAGE_RELEASE": str(published.record),
        "MCP_BRIDGE_IMAGE_PULL": "never",
    }
    try:
        async with open_bridge(tmp_path / "bridge", env=env) as bridge:
            result = await bridge.run("print('must not run')")
        text = bridge_text(result) or code_text(result)
        assert result.is_error is True
        assert "must not run" not in code_text(result)
        assert f"{published.local} is present but is NOT the image release" in text, text
        assert f"expected {image.digest} (image ID {image.config})" in text  # expected
        assert f"found image ID {impostor}" in text  # found
        assert f"mcp-code-execution-mode image pull --image {published.local}`" in text  # fix
        assert _image_id(published.local) == impostor  # nothing was pulled or moved
    finally:
        _podman("rmi", impostor.removeprefix("sha256:"), check=False)


async def test_an_image_configured_by_digest_is_pulled_by_that_digest_and_runs(
    registry: Registry, published: Published, tmp_path: Path
) -> None:
    # A team's own image, pushed unsigned and unknown to the release record.
    team = _publish(registry, tmp_path, "team", sign_by=None)
    (pushed,) = team.release.images.values()
    _drop(*_names_of(team))
    assert _podman("image", "exists", pushed.pinned, check=False).returncode != 0
    assert published.release.find(pushed.pinned) is None
    env = {"MCP_BRIDGE_IMAGE": pushed.pinned, "MCP_BRIDGE_IMAGE_RELEASE": str(published.record)}
    try:
        async with open_bridge(tmp_path / "bridge", env=env) as bridge:
            result = await bridge.run("print(open('/marker').read())")
        assert result.is_error is False, bridge_text(result)
        assert code_text(result).strip() == team.marker
        assert pushed.digest in {d.rpartition("@")[2] for d in _digests(pushed.pinned)}
    finally:
        _podman("rmi", pushed.pinned, check=False)


def test_doctor_pulls_an_image_configured_by_digest_with_progress(
    registry: Registry, published: Published, tmp_path: Path
) -> None:
    team = _publish(registry, tmp_path, "team-doctor", sign_by=None)
    (pushed,) = team.release.images.values()
    _drop(*_names_of(team))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MCP_BRIDGE_")},
        "MCP_BRIDGE_IMAGE": pushed.pinned,
        "MCP_BRIDGE_IMAGE_RELEASE": str(published.record),
        "MCP_BRIDGE_DISCOVER": "false",
        "MCP_BRIDGE_STATE_DIR": str(tmp_path / "state"),
    }
    try:
        done = subprocess.run(
            [sys.executable, "-m", "mcp_code_execution_mode", "doctor"],
            capture_output=True, text=True, env=env, timeout=600,
        )  # fmt: skip
        assert f"pulled {pushed.pinned} by digest through podman" in done.stdout, (
            done.stdout + done.stderr
        )
        assert "Writing manifest" in done.stdout  # podman's progress, shown as it comes
    finally:
        _podman("rmi", pushed.pinned, check=False)


def _bridge_image(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bridge_image", *args], capture_output=True, text=True, timeout=600
    )


def _custom_context(work: Path) -> Path:
    """images/examples/custom with a wheel of a small project of ours (no index needed)."""
    project = work / "project"
    (project / "src/sandbox_extra").mkdir(parents=True)
    (project / "src/sandbox_extra/__init__.py").write_text("ANSWER = 42\n")
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'
        '[project]\nname = "sandbox-extra"\nversion = "1.0"\n'
        '[tool.hatch.build.targets.wheel]\npackages = ["src/sandbox_extra"]\n'
    )
    context = work / "custom"
    shutil.copytree(REPO / "images/examples/custom", context)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "--wheel-dir", str(context / "wheels"), str(project)],
        capture_output=True, check=True,
    )  # fmt: skip
    return context


def _published_base(published: Published) -> str:
    """``image pull`` then ``image base``, as docs/images.md tells a user to."""
    record = str(published.record)
    pulled = _bridge_image("pull", "--image", published.local, "--release", record)
    assert pulled.returncode == 0, pulled.stderr
    base = _bridge_image("base", "--image", published.local, "--release", record)
    assert base.returncode == 0, base.stderr
    return base.stdout.strip()


async def test_a_custom_image_from_the_published_digest_verifies_and_runs(
    published: Published, tmp_path: Path
) -> None:
    base = _published_base(published)
    assert base == published.release.images[published.local].pinned
    assert "@sha256:" in base
    tag = f"localhost/mcp-bridge-registry-test:custom-{uuid.uuid4().hex[:10]}"
    try:
        _podman(
            "build", "--pull=never", "--network=none", f"--tag={tag}",
            f"--build-arg=BASE_IMAGE={base}",
            "--build-arg=PIP_ARGS=--no-index --find-links /ctx/wheels sandbox-extra",
            str(_custom_context(tmp_path)),
        )  # fmt: skip
        verified = _bridge_image("verify", "--image", tag)
        assert verified.returncode == 0, verified.stderr
        assert "installed files intact" in verified.stdout
        env = {"MCP_BRIDGE_IMAGE": tag, "MCP_BRIDGE_IMAGE_RELEASE": str(published.record)}
        async with open_bridge(tmp_path / "bridge", env=env) as bridge:
            result = await bridge.run("import sandbox_extra\nprint(sandbox_extra.ANSWER)")
        assert code_text(result).strip() == "42", bridge_text(result)
    finally:
        _drop(tag)


_OTHER_PROTOCOL = """
import pathlib, re, sys, bridge_protocol.versions as v
path = pathlib.Path(v.__file__)
path.write_text(re.sub(r"SUPPORTED_VERSIONS: tuple\\[int, \\.\\.\\.\\] = \\([^)]*\\)",
                       f"SUPPORTED_VERSIONS: tuple[int, ...] = ({sys.argv[1]},)", path.read_text()))
"""


@pytest.mark.parametrize(("version", "side"), [(99, "NEWER"), (0, "OLDER")])
async def test_an_image_of_another_protocol_version_is_explained(
    published: Published, tmp_path: Path, version: int, side: str
) -> None:
    base = _published_base(published)
    context = tmp_path / "other"
    context.mkdir()
    (context / "other.py").write_text(_OTHER_PROTOCOL)
    (context / "Containerfile").write_text(
        "ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nUSER 0:0\n"
        f"RUN --mount=type=bind,source=.,target=/ctx python /ctx/other.py {version}\n"
        "USER 65534:65534\n"
    )
    tag = f"localhost/mcp-bridge-registry-test:protocol-{version}-{uuid.uuid4().hex[:10]}"
    # OLDER: the stale image under a name the release lists (an upgrade without a pull): it is
    # not the pinned image, so with pulls off it is refused before any handshake (with pulls on
    # it is replaced: test_another_image_under_the_released_name_is_replaced_by_the_verified_pull);
    # NEWER: a custom image the release does not know.
    record = published.record
    pulls = "auto"
    if side == "OLDER":
        listed = {**published.release.images, tag: published.release.images[published.local]}
        record = write_release(replace(published.release, images=listed), tmp_path / "r.json")
        pulls = "never"
    try:
        _podman(
            "build", "--pull=never", "--network=none", f"--tag={tag}",
            f"--build-arg=BASE_IMAGE={base}", str(context),
        )  # fmt: skip
        verified = _bridge_image("verify", "--image", tag)
        assert verified.returncode == 1
        ours = list(SUPPORTED_VERSIONS)
        assert f"speaks protocol [{version}], this bridge speaks {ours}" in verified.stderr
        assert f"{side.lower()} than this release" in verified.stderr
        assert "bridge_protocol/versions.py" in verified.stderr  # changed since install
        env = {
            "MCP_BRIDGE_IMAGE": tag,
            "MCP_BRIDGE_IMAGE_RELEASE": str(record),
            "MCP_BRIDGE_IMAGE_PULL": pulls,
        }
        async with open_bridge(tmp_path / "bridge", env=env) as bridge:
            result = await bridge.run("print('must not run')")
        text = bridge_text(result) or code_text(result)
        assert result.is_error is True
        assert "must not run" not in code_text(result)
        if side == "OLDER":
            digest = published.release.images[published.local].digest
            assert f"{tag} is present but is NOT the image release" in text, text
            assert f"expected {digest}" in text
            assert f"image pull --image {tag}`" in text
        else:
            assert f"sandbox image '{tag}' does not match this bridge" in text, text
            assert f"speaks protocol [{version}], the bridge speaks {ours}" in text
            assert f"{side} than this bridge" in text
            assert "image base" in text
    finally:
        _drop(tag)
