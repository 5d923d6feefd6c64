import re
import subprocess
import sys

from bridge_core._ownership import Owner, current_owner
from bridge_core.runtime._hardening import (
    CONTAINER_NAME_PREFIX,
    ContainerRecord,
    container_labels,
    container_name,
    format_bytes,
    select_leftovers,
    ulimits,
)
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


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _labels(owner: str | None, product: str | None = "sandbox") -> dict[str, str]:
    labels = {}
    if product is not None:
        labels[PRODUCT_LABEL] = product
    if owner is not None:
        labels[OWNER_LABEL] = owner
    return labels


def test_leftovers_are_only_containers_of_dead_owners() -> None:
    live = current_owner().label
    dead = f"{_dead_pid()}:1"
    records = [
        ContainerRecord("dead-owner", _labels(dead)),
        ContainerRecord("live-owner", _labels(live)),
        ContainerRecord("no-owner-label", _labels(None)),
        ContainerRecord("garbled-owner", _labels("not-a-pid")),
        ContainerRecord("not-ours", _labels(dead, product=None)),
        ContainerRecord("other-product-value", _labels(dead, product="something-else")),
    ]
    assert select_leftovers(records) == ["dead-owner"]


def test_leftover_selection_uses_the_given_liveness_check() -> None:
    records = [ContainerRecord("a", _labels("1:1")), ContainerRecord("b", _labels("2:2"))]
    assert select_leftovers(records, is_alive=lambda owner: owner.pid == 1) == ["b"]
