"""``bridge-image``: build, verify and inspect the sandbox images.

Progress goes to stderr; the result (tag, image ID, digest) to stdout.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import cast

from bridge_image import builder
from bridge_image._inputs import find_repo
from bridge_image._recipes import RECIPES, Variant
from bridge_image.errors import ImageError

__all__ = ["main"]


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description="Reproducible builds of the MCP code-execution sandbox."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--variant",
        choices=sorted(RECIPES),
        default="standard",
        help="which image (default: standard, with the data stack)",
    )
    common.add_argument(
        "--slim",
        action="store_const",
        dest="variant",
        const="slim",
        help="shorthand for --variant slim (no data stack)",
    )
    common.add_argument(
        "--offline",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="build FROM a local Debian bootstrap base, no registry (--no-offline: the python "
        f"image). Default: ${builder.OFFLINE_ENV}, else the path of the existing image",
    )
    common.add_argument(
        "--repo",
        type=Path,
        help="build from this checkout (default: the recipe packaged with this installation, "
        "else the checkout found upwards)",
    )
    tagged = argparse.ArgumentParser(add_help=False)
    tagged.add_argument(
        "--tag", help="the image name to build or check (default: the variant's, see `tag`)"
    )
    build = commands.add_parser(
        "build", parents=[common, tagged], help="build an image, print its digest"
    )
    build.add_argument("--if-stale", action="store_true", help="skip if the image is current")
    build.add_argument("--no-cache", action="store_true", help="rebuild every layer")
    commands.add_parser(
        "verify", parents=[common, tagged], help="rebuild from scratch; fail if the digest differs"
    )
    commands.add_parser(
        "status",
        parents=[common, tagged],
        help="show labels; exit 1 if the image is missing or stale",
    )
    commands.add_parser("tag", parents=[common], help="print the image tag")
    return parser


def _print_result(result: builder.BuildResult) -> None:
    print(result.tag)
    print(f"image-id: {result.image_id}")
    print(f"digest:   {result.digest}")
    if result.built:
        print(f"built in: {result.seconds:.1f} s")


def main(argv: Sequence[str] | None = None, *, prog: str = "bridge-image") -> int:
    """Entry point of the ``bridge-image`` command; returns the exit status.

    ``prog`` is the command name in usage and error lines (``mcp-code-execution-mode image``
    runs this same command line).
    """
    options = _parser(prog).parse_args(argv)
    variant = cast(Variant, options.variant)
    try:
        if options.command == "tag":
            print(RECIPES[variant].tag)
        elif options.command == "build":
            _print_result(
                builder.build(
                    variant,
                    offline=options.offline,
                    if_stale=options.if_stale,
                    no_cache=options.no_cache,
                    tag=options.tag,
                    repo=options.repo,
                    progress=_progress,
                )
            )
        elif options.command == "verify":
            result = builder.verify(
                variant,
                offline=options.offline,
                repo=options.repo,
                tag=options.tag,
                progress=_progress,
            )
            _print_result(result)
            print("verified: a rebuild from scratch gave the same image")
        else:
            found = builder.status(
                variant, offline=options.offline, repo=options.repo, tag=options.tag
            )
            print(found.tag)
            print(f"  recipe: {options.repo or find_repo()}")
            for key, value in sorted(found.labels.items()):
                print(f"  {key}={value}")
            state = "missing" if not found.present else ("stale" if found.stale else "current")
            print(f"status: {state} (inputs {found.expected_inputs_hash[:12]})")
            return 1 if found.stale else 0
    except ImageError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
