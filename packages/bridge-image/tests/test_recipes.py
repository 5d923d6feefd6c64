import re
import shutil
from pathlib import Path

import bridge_image
import pytest
from bridge_image import _recipes, _wheels, builder
from bridge_image._inputs import find_repo
from bridge_image.errors import BuildFailed

REPO = find_repo(Path(__file__).parent)


def test_image_names_are_the_documented_local_tags_of_this_version() -> None:
    # The tag is the release version (scripts/release.py holds IMAGE_VERSION to it).
    assert f"localhost/mcp-bridge-sandbox:{bridge_image.__version__}" == bridge_image.DEFAULT_IMAGE
    assert (
        f"localhost/mcp-bridge-sandbox-slim:{bridge_image.__version__}"
    ) == bridge_image.SLIM_IMAGE
    assert bridge_image.__version__ == bridge_image.IMAGE_VERSION
    assert _recipes.RECIPES["standard"].tag == bridge_image.DEFAULT_IMAGE
    assert _recipes.RECIPES["slim"].tag == bridge_image.SLIM_IMAGE


def test_image_labels_never_use_the_runtimes_container_ownership_label() -> None:
    # Containers inherit image labels; the bare product label marks containers the bridge owns.
    labels = [getattr(bridge_image, n) for n in bridge_image.__all__ if n.startswith("LABEL_")]
    assert "io.github.mcp-code-execution-mode" not in labels
    assert all(not label.endswith(".owner") for label in labels)


def test_protocol_versions_are_read_from_the_repository_sources() -> None:
    assert _recipes.protocol_versions(REPO) == "1,2"


def test_protocol_versions_list_every_supported_version(tmp_path: Path) -> None:
    versions = tmp_path / "packages/bridge-protocol/src/bridge_protocol/versions.py"
    versions.parent.mkdir(parents=True)
    versions.write_text("SUPPORTED_VERSIONS = (2, 1)\n")
    assert _recipes.protocol_versions(tmp_path) == "1,2"


def test_sandbox_client_version_comes_from_its_pyproject() -> None:
    assert _recipes.project_version(REPO) == "0.1.0"


def test_every_context_file_of_every_recipe_exists() -> None:
    for recipe in _recipes.RECIPES.values():
        for name in recipe.context_files:
            assert (REPO / recipe.directory / name).is_file(), name


@pytest.mark.parametrize("listing", ["requirements.txt", "data-stack.txt"])
def test_third_party_requirements_are_pinned_by_version_and_hash(listing: str) -> None:
    text = (REPO / "images/sandbox" / listing).read_text()
    requirements = re.split(r"\n(?=[a-z])", re.sub(r"(?m)^#.*\n", "", text).strip())
    assert requirements
    for requirement in requirements:
        assert re.match(r"^[a-z0-9-]+==[\w.]+ \\", requirement), requirement
        assert "--hash=sha256:" in requirement, requirement


def test_wheel_platforms_go_from_newest_manylinux_to_2014() -> None:
    tags = _wheels.wheel_platforms("amd64")
    assert tags[0] == "manylinux_2_28_x86_64"
    assert "manylinux_2_17_x86_64" in tags
    assert tags[-1] == "manylinux2014_x86_64"
    assert _wheels.wheel_platforms("arm64")[0] == "manylinux_2_28_aarch64"


def test_an_architecture_without_pinned_wheels_is_a_clear_error() -> None:
    with pytest.raises(BuildFailed, match="s390x"):
        _wheels.wheel_arch("s390x")


def _copy_inputs(target: Path) -> Path:
    for path in [
        "images",
        "packages/bridge-protocol",
        "packages/bridge-sandbox-client",
        "packages/bridge-image/src",
    ]:
        shutil.copytree(REPO / path, target / path, ignore=shutil.ignore_patterns("tests"))
    return target


def test_inputs_hash_separates_variants_and_paths(tmp_path: Path) -> None:
    repo = _copy_inputs(tmp_path)
    hashes = {
        builder.inputs_hash("slim", offline=False, repo=repo),
        builder.inputs_hash("slim", offline=True, repo=repo),
        builder.inputs_hash("standard", offline=False, repo=repo),
        builder.inputs_hash("standard", offline=True, repo=repo),
    }
    assert len(hashes) == 4


def test_a_sandbox_client_change_makes_both_images_stale(tmp_path: Path) -> None:
    repo = _copy_inputs(tmp_path)
    base = builder.inputs_hash("slim", offline=True, repo=repo)
    science = builder.inputs_hash("standard", offline=True, repo=repo)
    client = repo / "packages/bridge-sandbox-client/src/bridge_sandbox_client/__init__.py"
    client.write_text(client.read_text() + "\n# changed\n")
    assert builder.inputs_hash("slim", offline=True, repo=repo) != base
    assert builder.inputs_hash("standard", offline=True, repo=repo) != science


def test_a_data_stack_change_makes_only_the_standard_image_stale(tmp_path: Path) -> None:
    repo = _copy_inputs(tmp_path)
    slim = builder.inputs_hash("slim", offline=True, repo=repo)
    standard = builder.inputs_hash("standard", offline=True, repo=repo)
    listed = repo / "images/sandbox/data-stack.txt"
    listed.write_text(listed.read_text() + "# changed\n")
    assert builder.inputs_hash("slim", offline=True, repo=repo) == slim
    assert builder.inputs_hash("standard", offline=True, repo=repo) != standard


def test_a_test_file_change_does_not_make_the_image_stale(tmp_path: Path) -> None:
    repo = _copy_inputs(tmp_path)
    before = builder.inputs_hash("slim", offline=True, repo=repo)
    tests = repo / "packages/bridge-sandbox-client/tests"
    tests.mkdir()
    (tests / "test_new.py").write_text("def test_x() -> None: ...\n")
    assert builder.inputs_hash("slim", offline=True, repo=repo) == before


def test_a_new_system_package_changes_the_bootstrap_base(tmp_path: Path) -> None:
    repo = _copy_inputs(tmp_path)
    from bridge_image import _bootstrap

    before = _bootstrap.bootstrap_inputs_hash(repo)
    listed = repo / "images/sandbox/system-packages.txt"
    listed.write_text(listed.read_text() + "make\n")
    assert _bootstrap.bootstrap_inputs_hash(repo) != before


def test_a_digest_mismatch_names_the_differing_layers_and_labels() -> None:
    first = builder.BuildResult(
        "t", "sha256:a", "d", {"k": "1", bridge_image.LABEL_INPUTS_HASH: "h"}, layers=("x", "y")
    )
    second = builder.BuildResult(
        "t", "sha256:b", "d", {"k": "2", bridge_image.LABEL_INPUTS_HASH: "h"}, layers=("x", "z")
    )
    said = builder._differences(first, second)
    assert "layers 2 of 2 differ" in said
    assert "labels differ: k" in said
    assert "inputs changed" not in said


def test_a_digest_mismatch_from_edited_inputs_says_so() -> None:
    first = builder.BuildResult("t", "a", "d", {bridge_image.LABEL_INPUTS_HASH: "h1"})
    second = builder.BuildResult("t", "b", "d", {bridge_image.LABEL_INPUTS_HASH: "h2"})
    assert "inputs changed while verifying" in builder._differences(first, second)
