"""What each image variant is built from: its directory, its inputs, its tag."""

from __future__ import annotations

import ast
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from bridge_image._inputs import recorded_revisions, source_revision, tree_files
from bridge_image.errors import MissingInput
from bridge_image.names import DEFAULT_IMAGE, SLIM_IMAGE

__all__ = [
    "RECIPES",
    "RECIPE_PATHS",
    "Recipe",
    "Variant",
    "packaged_files",
    "project_version",
    "protocol_versions",
    "recipe_revision",
]

Variant = Literal["slim", "standard"]

_PROTOCOL = "packages/bridge-protocol"
_CLIENT = "packages/bridge-sandbox-client"
_BUILDER = "packages/bridge-image/src"


def _project_inputs(project: str) -> tuple[str, ...]:
    # Exactly what goes into the project's wheel (sources, metadata, readme): not its tests.
    return (f"{project}/pyproject.toml", f"{project}/README.md", f"{project}/src")


@dataclass(frozen=True, slots=True)
class Recipe:
    """One image variant: ``directory`` holds its Containerfile and pinned package lists."""

    variant: Variant
    tag: str
    title: str
    """The image's ``org.opencontainers.image.title``: its name without registry and tag."""
    directory: str
    context_files: tuple[str, ...]
    inputs: tuple[str, ...]
    """Repository paths whose content decides the image (hashed into the inputs-hash label)."""
    projects: tuple[str, ...] = (_PROTOCOL, _CLIENT)
    """Repository projects built into wheels for this image."""
    data_stack: bool = False
    """Whether ``data-stack.txt`` (and its wheels) goes into the build context."""


_DIRECTORY = "images/sandbox"
_COMMON_FILES = (
    "Containerfile",
    "install-system-packages",
    "requirements.txt",
    "system-packages.txt",
)
_COMMON_INPUTS = (
    *(f"{_DIRECTORY}/{name}" for name in _COMMON_FILES),
    *_project_inputs(_PROTOCOL),
    *_project_inputs(_CLIENT),
    _BUILDER,
)

# Both variants come from one Containerfile, so they share every layer up to the data stack and a
# change of the sandbox client rebuilds only the last layer of each.
RECIPES: dict[Variant, Recipe] = {
    "slim": Recipe(
        variant="slim",
        tag=SLIM_IMAGE,
        title="mcp-bridge-sandbox-slim",
        directory=_DIRECTORY,
        context_files=_COMMON_FILES,
        inputs=_COMMON_INPUTS,
    ),
    "standard": Recipe(
        variant="standard",
        tag=DEFAULT_IMAGE,
        title="mcp-bridge-sandbox",
        directory=_DIRECTORY,
        context_files=(*_COMMON_FILES, "data-stack.txt"),
        inputs=(*_COMMON_INPUTS, f"{_DIRECTORY}/data-stack.txt"),
        data_stack=True,
    ),
}


RECIPE_PATHS: tuple[str, ...] = tuple(
    sorted(
        {
            *(path for recipe in RECIPES.values() for path in recipe.inputs),
            # Read by _bootstrap (the offline base), which hashes it into the base's own inputs.
            "images/bootstrap/Containerfile",
        }
    )
)
"""Every repository path a build reads: what a wheel of bridge-image packages as its recipe."""


def packaged_files(repo: Path) -> dict[str, Path]:
    """The packaged recipe of checkout ``repo``: repository path (posix) -> file.

    The same files the inputs hash covers (:func:`~bridge_image._inputs.tree_files`), so the
    recipe installed from a wheel hashes like the checkout it was built from.
    """
    found: dict[str, Path] = {}
    for path in RECIPE_PATHS:
        if not (repo / path).exists():
            raise MissingInput(f"{repo / path} is missing: cannot package the image recipe")
        for file in tree_files(repo / path):
            found[file.relative_to(repo).as_posix()] = file
    return found


def recipe_revision(root: Path, recipe: Recipe) -> str:
    """The revision label of ``recipe`` built from ``root``: recorded in a packaged recipe,
    else the last git commit of its inputs (``unknown`` outside git)."""
    recorded = recorded_revisions(root)
    if recorded is not None:
        return recorded.get(recipe.variant, "unknown")
    return source_revision(root, recipe.inputs)


def project_version(repo: Path, project: str = _CLIENT) -> str:
    """The ``[project] version`` of a repository project's pyproject.toml."""
    path = repo / project / "pyproject.toml"
    try:
        version = tomllib.loads(path.read_text())["project"]["version"]
    except (OSError, KeyError, tomllib.TOMLDecodeError) as exc:
        raise MissingInput(f"cannot read the project version from {path}: {exc}") from exc
    return str(version)


def protocol_versions(repo: Path) -> str:
    """``SUPPORTED_VERSIONS`` of the repository's protocol, as ``"1"`` or ``"1,2"``.

    Read from the source of ``versions.py`` (the literal assignment, parsed, never executed), so
    the builder reports the versions of the sources it is building, not of whatever protocol is
    installed, and works where ``bridge_protocol`` is not installed at all.
    """
    path = repo / _PROTOCOL / "src/bridge_protocol/versions.py"
    if not path.is_file():
        raise MissingInput(f"protocol version registry not found at {path}")
    versions: tuple[int, ...] | None = None
    for node in ast.parse(path.read_text(), filename=str(path)).body:
        target: ast.expr | None = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and target.id == "SUPPORTED_VERSIONS" and value:
            versions = tuple(ast.literal_eval(value))
    if not versions or not all(isinstance(v, int) for v in versions):
        raise MissingInput(f"no literal SUPPORTED_VERSIONS tuple of integers in {path}")
    return ",".join(str(v) for v in sorted(versions))
