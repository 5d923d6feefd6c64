"""What each image variant is built from: its directory, its inputs, its tag."""

from __future__ import annotations

import ast
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from bridge_image.errors import MissingInput
from bridge_image.names import DEFAULT_IMAGE, SLIM_IMAGE

__all__ = ["RECIPES", "Recipe", "Variant", "protocol_versions", "project_version"]

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
