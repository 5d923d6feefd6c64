"""The decision about the configured image before the first sandbox (bridge_image.supply), with a
fake engine store: what each case does, and what a refusal says."""

from __future__ import annotations

from typing import Any

import pytest
from bridge_image._engine import EngineStore, StoredImage, _stored
from bridge_image.errors import MissingTool, PullRefused
from bridge_image.names import DEFAULT_IMAGE, SLIM_IMAGE
from bridge_image.pull import PulledImage
from bridge_image.release import PublishedImage, Release
from bridge_image.supply import supply_image

NAME = "localhost/mcp-bridge-sandbox:0.1.0"
DIGEST = "sha256:" + "ab" * 32
CONFIG = "sha256:" + "cd" * 32
OTHER_DIGEST = "sha256:" + "ef" * 32
OTHER_ID = "sha256:" + "01" * 32
PUBLISHED = PublishedImage(
    "standard", "registry.example.org/acme/mcp-bridge-sandbox:0.1.0", DIGEST, CONFIG
)
RELEASE = Release(version="0.1.0", images={NAME: PUBLISHED})
GENUINE = StoredImage(CONFIG, frozenset({DIGEST}))
TAMPERED = StoredImage(OTHER_ID, frozenset({OTHER_DIGEST}))
CUSTOM = f"registry.example.org/team/sandbox@{DIGEST}"


class FakeStore:
    """Names → images; ``pull`` stores ``pulled_as`` under the reference it was asked for."""

    def __init__(self, engine: str = "podman") -> None:
        self.engine = engine
        self.names: dict[str, StoredImage] = {}
        self.pulls: list[str] = []
        self.pulled_as: StoredImage | None = None

    def inspect(self, name: str) -> StoredImage | None:
        return self.names.get(name)

    def pull(self, reference: str, *, progress: Any) -> None:
        self.pulls.append(reference)
        if self.pulled_as is not None:
            self.names[reference] = self.pulled_as


def _store(names: dict[str, StoredImage] | None = None, engine: str = "podman") -> FakeStore:
    store = FakeStore(engine)
    store.names.update(names or {})
    return store


class FakePull:
    """``pull_released``: records the call; ``result`` is what then holds the name."""

    def __init__(self, store: FakeStore, result: StoredImage | None = GENUINE) -> None:
        self.store, self.result, self.calls = store, result, []  # type: ignore[var-annotated]

    def __call__(self, image: str, release: Release, *, progress: Any) -> PulledImage:
        self.calls.append(image)
        if self.result is not None:
            self.store.names[image] = self.result
        return PulledImage(release.images[image], (image,), self.result.id if self.result else "")


def _supply(store: FakeStore, image: str = NAME, *, pull: bool = True, **kw: Any) -> Any:
    puller = kw.pop("puller", None) or FakePull(store)
    supplied = supply_image(
        image, engine=store.engine, release=kw.pop("release", RELEASE), pull=pull,
        store=store, pull_release=puller, **kw,
    )  # fmt: skip
    return supplied, puller


def test_a_present_image_carrying_the_pinned_digest_is_verified_without_a_pull() -> None:
    supplied, puller = _supply(_store({NAME: StoredImage(OTHER_ID, frozenset({DIGEST}))}))
    assert (supplied.case, supplied.usable, puller.calls) == ("verified", True, [])


def test_on_docker_a_loaded_image_is_verified_by_its_image_id() -> None:
    # `podman save | docker load` keeps the image ID (the config digest), not the manifest digest.
    supplied, _ = _supply(_store({NAME: StoredImage(CONFIG, frozenset())}, "docker"))
    assert (supplied.case, supplied.image_id) == ("verified", CONFIG)


def test_another_image_under_a_released_name_is_replaced_by_the_verified_pull() -> None:
    store = _store({NAME: TAMPERED})
    supplied, puller = _supply(store)
    assert puller.calls == [NAME]
    assert (supplied.case, supplied.pulled, supplied.usable) == ("pulled", True, True)
    assert supplied.image_id == CONFIG
    assert OTHER_ID in supplied.detail  # what was replaced is said


def test_with_pulls_off_another_image_under_a_released_name_is_refused_naming_both_digests() -> (
    None
):
    supplied, puller = _supply(_store({NAME: TAMPERED}), pull=False)
    assert (supplied.case, supplied.usable, puller.calls) == ("refused", False, [])
    assert NAME in supplied.detail
    assert DIGEST in supplied.detail
    assert CONFIG in supplied.detail
    assert OTHER_ID in supplied.detail
    assert OTHER_DIGEST in supplied.detail
    assert f"mcp-code-execution-mode image pull --image {NAME}" in supplied.fix
    assert "MCP_BRIDGE_IMAGE_PULL=never" in supplied.fix


def test_on_docker_another_image_under_a_released_name_is_refused_and_never_pulled() -> None:
    supplied, puller = _supply(_store({NAME: TAMPERED}, "docker"))
    assert (supplied.case, puller.calls) == ("refused", [])
    assert f"podman save {NAME} | docker load" in supplied.fix


def test_a_pull_that_leaves_another_image_under_the_name_is_refused() -> None:
    store = _store({NAME: TAMPERED})
    supplied, _ = _supply(store, puller=FakePull(store, result=TAMPERED))
    assert (supplied.case, supplied.usable) == ("refused", False)
    assert f"expected {DIGEST}" in supplied.detail


def test_a_refused_pull_is_a_refusal_carrying_its_reason() -> None:
    def refuse(image: str, release: Release, *, progress: Any) -> PulledImage:
        raise PullRefused("the image is NOT signed")

    supplied, _ = _supply(_store(), puller=refuse)
    assert supplied.case == "refused"
    assert "NOT signed" in supplied.detail


def test_a_missing_released_image_is_missing_when_it_is_not_pulled_here() -> None:
    for store, pull in ((_store(), False), (_store(engine="docker"), True)):
        supplied, puller = _supply(store, pull=pull)
        assert (supplied.case, supplied.usable, puller.calls) == ("missing", False, [])
        assert f"image pull --image {NAME}" in supplied.fix


def test_a_missing_digest_reference_is_pulled_through_the_engine_by_that_digest() -> None:
    for engine in ("podman", "docker"):
        store = _store(engine=engine)
        store.pulled_as = StoredImage(OTHER_ID, frozenset({DIGEST}))
        supplied, puller = _supply(store, CUSTOM)
        assert store.pulls == [CUSTOM]
        assert puller.calls == []  # not the release's signed pull: the record does not list it
        assert (supplied.case, supplied.pulled, supplied.usable) == ("digest-pinned", True, True)


def test_a_present_digest_reference_is_digest_pinned_without_a_pull() -> None:
    store = _store({CUSTOM: StoredImage(OTHER_ID, frozenset({DIGEST}))})
    supplied, _ = _supply(store, CUSTOM)
    assert (supplied.case, supplied.pulled, store.pulls) == ("digest-pinned", False, [])


def test_a_digest_pull_that_stores_another_digest_is_refused() -> None:
    store = _store()
    store.pulled_as = StoredImage(OTHER_ID, frozenset({OTHER_DIGEST}))
    supplied, _ = _supply(store, CUSTOM)
    assert (supplied.case, supplied.usable) == ("refused", False)


def test_with_pulls_off_a_missing_digest_reference_names_the_pull_command() -> None:
    store = _store()
    supplied, _ = _supply(store, CUSTOM, pull=False)
    assert (supplied.case, store.pulls) == ("missing", [])
    assert f"`podman pull {CUSTOM}`" in supplied.fix


def test_a_digest_reference_with_no_registry_is_not_pulled() -> None:
    store = _store()
    supplied, _ = _supply(store, f"localhost/mine@{DIGEST}")
    assert (supplied.case, store.pulls) == ("missing", [])


def test_a_released_pinned_reference_is_the_release_not_a_custom_digest() -> None:
    store = _store({PUBLISHED.pinned: GENUINE})
    supplied, _ = _supply(store, PUBLISHED.pinned)
    assert supplied.case == "verified"


def test_a_missing_tag_neither_released_nor_pinned_is_not_pulled_and_names_the_commands() -> None:
    store = _store()
    tag = "registry.example.org:5000/team/sandbox:2"
    supplied, puller = _supply(store, tag)
    assert (supplied.case, supplied.usable, store.pulls, puller.calls) == (
        "unknown-tag", False, [], []
    )  # fmt: skip
    assert f"`podman pull {tag}`" in supplied.fix
    assert "MCP_BRIDGE_IMAGE=registry.example.org:5000/team/sandbox@sha256:" in supplied.fix
    local, _ = _supply(store, "localhost/mine:1")
    assert "`mcp-code-execution-mode image build --tag localhost/mine:1`" in local.fix
    assert "pull" not in local.fix
    default, _ = _supply(store, DEFAULT_IMAGE, release=None)
    assert "`mcp-code-execution-mode image build`" in default.fix
    slim, _ = _supply(store, SLIM_IMAGE, release=None)
    assert "`mcp-code-execution-mode image build --slim`" in slim.fix


def test_a_present_unknown_tag_runs_as_the_store_has_it() -> None:
    supplied, _ = _supply(_store({"localhost/mine:1": TAMPERED}), "localhost/mine:1")
    assert (supplied.case, supplied.usable, supplied.image_id) == ("unknown-tag", True, OTHER_ID)


def test_without_the_engine_command_line_the_image_is_unchecked() -> None:
    class Remote(FakeStore):
        def inspect(self, name: str) -> StoredImage | None:
            raise MissingTool("podman is not installed")

    supplied, puller = _supply(Remote())
    assert (supplied.case, supplied.usable, puller.calls) == ("unchecked", True, [])


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (  # podman: bare hex ID, its own Digest and RepoDigests
            [{"Id": "cd" * 32, "Digest": DIGEST, "RepoDigests": [f"r.example/x@{OTHER_DIGEST}"]}],
            StoredImage(CONFIG, frozenset({DIGEST, OTHER_DIGEST})),
        ),
        (  # docker after `docker load`: prefixed ID, no RepoDigests
            [{"Id": CONFIG, "RepoDigests": []}],
            StoredImage(CONFIG, frozenset()),
        ),
        ([], None),
    ],
)
def test_podman_and_docker_inspect_output_read_alike(raw: Any, expected: Any) -> None:
    assert _stored(raw) == expected


def test_the_engine_store_reports_a_missing_command_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    with pytest.raises(MissingTool):
        EngineStore("docker").inspect(NAME)


@pytest.mark.parametrize(
    "spelled",
    [
        "mcp-bridge-sandbox:0.1.0",  # podman runs localhost/mcp-bridge-sandbox:0.1.0 for it
        "LOCALHOST/mcp-bridge-sandbox:0.1.0",
        "REGISTRY.example.org/acme/mcp-bridge-sandbox:0.1.0",  # a host name has no case
    ],
)
def test_a_released_name_spelled_as_the_engine_reads_it_is_checked_not_run_unchecked(
    spelled: str,
) -> None:
    # The engine runs the released name's image under these spellings: a tampered image there
    # is refused as under the released name, never run as an unknown tag.
    supplied, _ = _supply(_store({spelled: TAMPERED}, engine="docker"), spelled)
    assert (supplied.case, supplied.usable) == ("refused", False), supplied
    genuine, _ = _supply(_store({spelled: GENUINE}), spelled)
    assert (genuine.case, genuine.usable) == ("verified", True)
    if "example" not in spelled:
        # A tampered local image is replaced by pulling the released one under its own name.
        store = _store({spelled: TAMPERED})
        puller = FakePull(store)
        _supply(store, spelled, puller=puller)
        assert puller.calls == [NAME]
