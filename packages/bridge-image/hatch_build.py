"""Packages the image recipe into mcp-bridge-image's wheel and sdist.

An installed bridge-image builds the sandbox image without a checkout: the wheel carries every
repository file a build reads, at its repository path, under ``bridge_image/_recipe/`` (the list
is ``bridge_image._recipes.RECIPE_PATHS``), plus the revision label of each variant, recorded here
because an installation has no git history. The sdist carries the same files under
``src/bridge_image/_recipe/``, so a wheel built from the sdist has them too (this hook then finds
no checkout around the project and adds nothing).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

_RECIPE = "bridge_image/_recipe"

# Run in a child interpreter with this project's src first on its path: the builder's own modules
# say what the recipe is (one definition), and an installed bridge_image must not answer instead.
_LIST = """
import json, sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from bridge_image._recipes import RECIPES, packaged_files, recipe_revision
checkout = Path(sys.argv[2])
print(json.dumps({
    "files": {k: str(v) for k, v in packaged_files(checkout).items()},
    "revisions": {n: recipe_revision(checkout, r) for n, r in sorted(RECIPES.items())},
}))
"""


class RecipeHook(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        project = Path(self.root)
        checkout = project.parent.parent
        if version == "editable" or not (checkout / "images/sandbox/Containerfile").is_file():
            # Editable: the checkout itself is the recipe. No checkout around the project: built
            # from an sdist (the recipe is in src/ already) or from this folder alone.
            return
        listed = subprocess.run(
            [sys.executable, "-c", _LIST, str(project / "src"), str(checkout)],
            capture_output=True,
            text=True,
            check=False,
        )
        if listed.returncode != 0:
            raise RuntimeError(f"cannot list the image recipe of {checkout}:\n{listed.stderr}")
        recipe = json.loads(listed.stdout)
        # Included from a copy: hatchling leaves a force-included file out of its normal place,
        # and this builder's own modules are in the recipe too.
        self._scratch = Path(tempfile.mkdtemp(prefix="bridge-image-recipe-"))
        copy = self._scratch / "recipe"
        for relative, file in recipe["files"].items():
            (copy / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(file, copy / relative)
        (copy / "revisions.json").write_text(
            json.dumps(recipe["revisions"], indent=2, sort_keys=True) + "\n"
        )
        prefix = _RECIPE if self.target_name == "wheel" else f"src/{_RECIPE}"
        build_data["force_include"][str(copy)] = prefix

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        scratch = getattr(self, "_scratch", None)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
