"""Every module a member's sources import is declared in that member's pyproject.toml.

An import that works only because another dependency happens to bring its distribution along
(``pydantic`` through the MCP SDK, for instance) breaks the day that dependency drops it. The
check reads the sources with :mod:`ast` (imports under ``TYPE_CHECKING`` count too: mypy needs
them) and maps each top-level module to the distributions that provide it in the tests
environment, where every member and its dependencies are installed.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

OPTIONAL_IMPORTS = {
    # Loaded only by matplotlib itself (MPLBACKEND=module://...), so only where it is installed:
    # the standard image has it, the slim one does not and never imports this module.
    ("mcp-bridge-sandbox-client", "matplotlib"),
}
"""(member, module) pairs imported only where the module is known to be present."""


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _members() -> dict[str, Path]:
    """Distribution name of each member -> its folder."""
    found = {}
    for pyproject in sorted((REPO / "packages").glob("*/pyproject.toml")):
        found[_normalise(tomllib.loads(pyproject.read_text("utf-8"))["project"]["name"])] = (
            pyproject.parent
        )
    return found


def _declared(folder: Path) -> set[str]:
    project = tomllib.loads((folder / "pyproject.toml").read_text("utf-8"))["project"]
    names = set()
    for requirement in project.get("dependencies", []):
        match = re.match(r"[A-Za-z0-9._-]+", requirement)
        assert match is not None, requirement
        names.add(_normalise(match.group(0)))
    return names


def _imported_top_level(folder: Path) -> dict[str, Path]:
    """Third-party or sibling top-level module -> the first source file importing it."""
    found: dict[str, Path] = {}
    for source in sorted((folder / "src").rglob("*.py")):
        for node in ast.walk(ast.parse(source.read_text("utf-8"), str(source))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top not in sys.stdlib_module_names and top != "__future__":
                    found.setdefault(top, source)
    return found


def _providers() -> dict[str, set[str]]:
    """Top-level module -> distributions providing it (members are editable: map them here)."""
    providers = {
        module: {_normalise(d) for d in dists} for module, dists in packages_distributions().items()
    }
    for name, folder in _members().items():
        for package in (folder / "src").iterdir():
            if (package / "__init__.py").is_file():
                providers.setdefault(package.name, set()).add(name)
    return providers


def test_every_imported_distribution_is_declared() -> None:
    providers = _providers()
    undeclared = []
    for name, folder in _members().items():
        allowed = _declared(folder) | {name}
        for module, source in sorted(_imported_top_level(folder).items()):
            if (name, module) in OPTIONAL_IMPORTS:
                continue
            dists = providers.get(module, set())
            if not dists & allowed:
                undeclared.append(
                    f"{source.relative_to(REPO)} imports {module!r} "
                    f"(from {', '.join(sorted(dists)) or 'no installed distribution'}): "
                    f"declare it in {folder.name}/pyproject.toml"
                )
    assert not undeclared, "\n".join(undeclared)


def test_the_check_sees_an_undeclared_import(tmp_path: Path) -> None:
    """The scan itself works: a module importing pydantic shows up as importing it."""
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "__init__.py").write_text(
        "from __future__ import annotations\nimport json\nfrom pydantic.fields import Field\n"
    )
    imported = _imported_top_level(tmp_path)
    assert set(imported) == {"pydantic"}
    assert "pydantic" in _providers()["pydantic"]
