import re

from bridge_core.runtime._hardening import (
    CONTAINER_NAME_PREFIX,
    container_labels,
    container_name,
    format_bytes,
    ulimits,
)
from bridge_core.runtime._ownership import Owner
from bridge_core.runtime.base import OWNER_LABEL, PRODUCT_LABEL, SandboxLimits, SandboxSpec


def test_ulimits_always_list_nofile_and_nproc_with_soft_equal_hard() -> None:
    limits = SandboxLimits(nofile=256, nproc=99)
    assert {(u.name, u.soft, u.hard) for u in ulimits(limits)} == {
        ("nofile", 256, 256),
        ("nproc", 99, 99),
    }


def test_container_names_are_prefixed_safe_and_unique() -> None:
    first, second = container_name("default"), container_name("default")
    assert first != second
    assert first.startswith(f"{CONTAINER_NAME_PREFIX}default-")
    weird = container_name("../../etc/passwd; rm -rf /" + "x" * 200)
    assert re.fullmatch(r"[a-zA-Z0-9][a-zA-Z0-9_.-]*", weird)
    assert len(weird) < 70


def test_an_unusable_sandbox_name_still_gives_a_valid_container_name() -> None:
    assert re.fullmatch(rf"{CONTAINER_NAME_PREFIX}sandbox-[0-9a-f]{{8}}", container_name("///"))


def test_spec_labels_cannot_forge_ownership() -> None:
    spec = SandboxSpec(
        name="s",
        image="img",
        labels={OWNER_LABEL: "1:1", PRODUCT_LABEL: "nope", "team": "x"},
    )
    labels = container_labels(spec, Owner(42, 7))
    assert labels == {OWNER_LABEL: "42:7", PRODUCT_LABEL: "sandbox", "team": "x"}


def test_byte_sizes_are_formatted_in_the_units_users_write() -> None:
    assert format_bytes(512 * 1024 * 1024) == "512m"
    assert format_bytes(2 * 1024**3) == "2g"
    assert format_bytes(64 * 1024) == "64k"
    assert format_bytes(1000) == "1000b"
