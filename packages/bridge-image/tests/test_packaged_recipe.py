"""The recipe a wheel carries builds what the checkout builds (the wheel itself is tested in
integration-tests/packaging: built, installed with pipx and uv, and building an image)."""

import json
import shutil
from pathlib import Path

import pytest
from bridge_image import builder
from bridge_image._inputs import PACKAGED_RECIPE, REVISIONS_FILE, cache_dir, find_repo
from bridge_image._recipes import RECIPE_PATHS, RECIPES, packaged_files, recipe_revision
from bridge_image.cli import main
from bridge_image.errors import MissingInput

REPO = find_repo(Path(__file__).parent)


def _packaged_copy(target: Path) -> Path:
    for relative, file in packaged_files(REPO).items():
        (target / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(file, target / relative)
    return target


@pytest.mark.parametrize("offline", [False, True])
def test_the_packaged_files_hash_like_the_checkout_for_every_variant(
    tmp_path: Path, offline: bool
) -> None:
    recipe = _packaged_copy(tmp_path / "recipe")
    for variant in RECIPES:
        assert builder.inputs_hash(variant, offline=offline, repo=recipe) == builder.inputs_hash(
            variant, offline=offline, repo=REPO
        ), variant


def test_the_packaged_files_are_every_input_and_no_test_or_cache() -> None:
    files = packaged_files(REPO)
    assert "images/sandbox/Containerfile" in files
    assert "images/bootstrap/Containerfile" in files
    assert "packages/bridge-sandbox-client/pyproject.toml" in files
    assert "packages/bridge-image/src/bridge_image/builder.py" in files
    for recipe in RECIPES.values():
        assert set(recipe.inputs) <= set(RECIPE_PATHS)
    assert not [f for f in files if "/tests/" in f or "__pycache__" in f or f.endswith(".pyc")]


def test_a_packaged_recipe_labels_images_with_its_recorded_revisions(tmp_path: Path) -> None:
    recipe = _packaged_copy(tmp_path / "recipe")
    (recipe / REVISIONS_FILE).write_text(json.dumps({"standard": "abc123+dirty"}))
    assert recipe_revision(recipe, RECIPES["standard"]) == "abc123+dirty"
    assert recipe_revision(recipe, RECIPES["slim"]) == "unknown"


def test_a_damaged_revisions_record_is_reported_by_path(tmp_path: Path) -> None:
    recipe = _packaged_copy(tmp_path / "recipe")
    (recipe / REVISIONS_FILE).write_text("[1, 2")
    with pytest.raises(MissingInput, match=REVISIONS_FILE):
        recipe_revision(recipe, RECIPES["slim"])


def test_builds_cache_in_a_writable_checkout_else_in_the_users_cache_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir(REPO) == REPO / ".cache/bridge-image"
    assert cache_dir(PACKAGED_RECIPE) == tmp_path / "xdg/mcp-code-execution-mode/bridge-image"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    home_cache = tmp_path / "home/.cache/mcp-code-execution-mode/bridge-image"
    assert cache_dir(PACKAGED_RECIPE) == home_cache


def test_the_command_name_can_be_the_servers(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["build", "--bogus"], prog="mcp-code-execution-mode image")
    assert exited.value.code == 2
    assert "mcp-code-execution-mode image: error" in capsys.readouterr().err
