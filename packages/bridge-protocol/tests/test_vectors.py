"""Golden vectors: committed frames of every protocol version keep decoding to the same messages."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import bridge_protocol
import pytest
from bridge_protocol import CURRENT_VERSION, MESSAGE_TYPES, SUPPORTED_VERSIONS, FrameDecoder, encode

TESTS = Path(__file__).parent
VECTORS = TESTS / "vectors"
ALL_VECTORS = sorted(VECTORS.glob("v*/*.cbor"))


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_vectors", TESTS / "make_vectors.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _expectation(cbor_path: Path) -> dict[str, Any]:
    namespace: dict[str, Any] = {
        name: getattr(bridge_protocol, name) for name in bridge_protocol.__all__
    }
    exec(cbor_path.with_suffix(".py").read_text(encoding="utf-8"), namespace)
    return namespace


def _version_of(path: Path) -> int:
    return int(path.parent.name.removeprefix("v"))


def test_every_supported_version_has_a_vector_directory() -> None:
    for version in SUPPORTED_VERSIONS:
        assert any((VECTORS / f"v{version}").glob("*.cbor"))


def test_every_message_kind_has_a_vector_in_the_current_version() -> None:
    kinds = {
        type(_expectation(path)["MESSAGE"]).KIND
        for path in VECTORS.glob(f"v{CURRENT_VERSION}/*.cbor")
    }
    assert kinds == set(MESSAGE_TYPES)


@pytest.mark.parametrize("path", ALL_VECTORS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_committed_vector_decodes_to_its_expected_message(path: Path) -> None:
    assert _version_of(path) in SUPPORTED_VERSIONS
    frame = path.read_bytes()
    expected = _expectation(path)["MESSAGE"]
    assert FrameDecoder().feed(frame) == [expected]
    decoder = FrameDecoder()
    decoded = [m for i in range(len(frame)) for m in decoder.feed(frame[i : i + 1])]
    assert decoded == [expected]


# Hand-built vectors (optional fields left out, keys reordered) are not what the encoder writes;
# for them decoding is what matters.
ENCODER_VECTORS = [
    p
    for p in ALL_VECTORS
    if _version_of(p) == CURRENT_VERSION and _expectation(p)["ENCODER_OUTPUT"]
]


@pytest.mark.parametrize("path", ENCODER_VECTORS, ids=lambda p: p.stem)
def test_the_encoder_still_produces_the_current_versions_bytes(path: Path) -> None:
    assert encode(_expectation(path)["MESSAGE"]) == path.read_bytes()


def test_every_planned_vector_is_committed() -> None:
    planned = _load_generator().planned_vectors()
    committed = {p.stem for p in VECTORS.glob(f"v{CURRENT_VERSION}/*.cbor")}
    assert set(planned) <= committed


def test_the_generator_refuses_to_overwrite_a_changed_vector(tmp_path: Path) -> None:
    generator = _load_generator()
    assert generator.main(["--out", str(tmp_path)]) == 0
    tampered = tmp_path / "ping.cbor"
    tampered.write_bytes(b"not the frame")
    assert generator.main(["--out", str(tmp_path)]) == 1
    assert tampered.read_bytes() == b"not the frame"


def test_the_generator_fills_in_missing_vectors_and_leaves_the_rest(tmp_path: Path) -> None:
    generator = _load_generator()
    assert generator.main(["--out", str(tmp_path)]) == 0
    (tmp_path / "pong.cbor").unlink()
    (tmp_path / "pong.py").unlink()
    before = (tmp_path / "ping.py").stat().st_mtime_ns
    assert generator.main(["--out", str(tmp_path)]) == 0
    assert (tmp_path / "pong.cbor").exists()
    assert (tmp_path / "ping.py").stat().st_mtime_ns == before
