"""``bridge-image``: build, verify and inspect the sandbox images.

Progress goes to stderr; the result (tag, image ID, digest) to stdout.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from bridge_image import builder
from bridge_image._inputs import find_repo
from bridge_image._recipes import RECIPES, Variant
from bridge_image.check import check_image
from bridge_image.errors import ImageError
from bridge_image.publish import REGISTRY_ENV, publish
from bridge_image.pull import pull_released
from bridge_image.release import PACKAGED_RECORD, load_release

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
    verify = commands.add_parser(
        "verify",
        parents=[common, tagged],
        help="rebuild from scratch and fail if the digest differs; with --image, check that an "
        "image (a custom one) holds an intact sandbox client of this bridge's protocol",
    )
    verify.add_argument(
        "--image", help="check this existing image instead of rebuilding (no build, no registry)"
    )
    commands.add_parser(
        "status",
        parents=[common, tagged],
        help="show labels; exit 1 if the image is missing or stale",
    )
    commands.add_parser("tag", parents=[common], help="print the image tag")
    _registry_commands(commands, common)
    return parser


def _registry_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    """``release``, ``pull`` and ``base``: the published images (see docs/images.md)."""
    recorded = argparse.ArgumentParser(add_help=False)
    recorded.add_argument(
        "--release",
        type=Path,
        help="the release record (default: the one installed with this package, "
        f"{PACKAGED_RECORD.name})",
    )
    release = commands.add_parser(
        "release",
        parents=[common, recorded],
        help="build, push to a registry, sign, and record the pushed digests",
    )
    release.add_argument(
        "--all", action="store_true", help="release every variant (default: --variant's)"
    )
    release.add_argument(
        "--registry",
        default=os.environ.get(REGISTRY_ENV),
        help=f"registry[:port]/namespace to push to (default ${REGISTRY_ENV})",
    )
    release.add_argument("--sign-by", help="GPG key (fingerprint or ID) signing the images")
    release.add_argument("--sign-passphrase-file", type=Path, help="passphrase of that key")
    release.add_argument(
        "--lookaside",
        required=True,
        help="URL where users read the signatures (https://... or file:///...)",
    )
    release.add_argument(
        "--lookaside-staging",
        help="where the push writes them (file:///...; default: --lookaside), then publish "
        "that directory at --lookaside",
    )
    release.add_argument("--tag", help="the local image to push (default: the variant's tag)")
    release.add_argument(
        "--no-build", action="store_true", help="push the existing local image as it is"
    )
    pull = commands.add_parser(
        "pull",
        parents=[common, recorded],
        help="pull the released image by digest, verify its signature, tag it locally",
    )
    pull.add_argument("--image", help="the image name to pull (default: the variant's tag)")
    base = commands.add_parser(
        "base",
        parents=[common, recorded],
        help="print the released image pinned by digest (for FROM in a custom Containerfile)",
    )
    base.add_argument("--image", help="the local image name (default: the variant's tag)")


def _registry_main(options: argparse.Namespace, variant: Variant) -> int:
    if options.command == "release":
        if not options.registry:
            raise ImageError(f"name the registry: --registry or ${REGISTRY_ENV}")
        variants: list[Variant] = sorted(RECIPES) if options.all else [variant]
        done = publish(
            variants,
            registry=options.registry,
            sign_by=options.sign_by,
            lookaside=options.lookaside,
            staging=options.lookaside_staging,
            passphrase_file=options.sign_passphrase_file,
            tags={variant: options.tag} if options.tag else None,
            build=not options.no_build,
            offline=options.offline,
            record=options.release,
            progress=_progress,
        )
        for published in done.images.values():
            print(published.pinned)
        return 0
    release = load_release(options.release)
    if release is None:
        raise ImageError(
            f"no release record at {options.release or PACKAGED_RECORD}: this installation was "
            "not released with published images; build them (image build)"
        )
    name = getattr(options, "image", None) or RECIPES[variant].tag
    if options.command == "base":
        base = release.find(name)
        if base is None:
            raise ImageError(f"release {release.version} has no image {name}")
        print(base.pinned)
        return 0
    pulled = pull_released(name, release, progress=_progress)
    print(pulled.published.pinned)
    print(f"image-id: sha256:{pulled.image_id.removeprefix('sha256:')}")
    print(f"tagged:   {', '.join(pulled.names)}")
    return 0


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
        elif options.command in {"release", "pull", "base"}:
            return _registry_main(options, variant)
        elif options.command == "verify" and options.image:
            checked = check_image(options.image)
            print(checked.image)
            print(f"sandbox client: {checked.client_version}, protocol {list(checked.protocol)}")
            print(f"verified: {checked.files_checked} installed files intact")
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
