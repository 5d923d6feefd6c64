"""The release record (untrusted input), the trust files of a pull, and what is not an input."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from bridge_image._inputs import RELEASE_RECORD, hash_tree, tree_files
from bridge_image._trust import tls_verify, write_trust
from bridge_image.errors import ReleaseRecordError
from bridge_image.release import (
    PublishedImage,
    Release,
    SigningKey,
    load_release,
    repository_of,
    write_release,
)

DIGEST = "sha256:" + "ab" * 32
KEY = """\
-----BEGIN PGP PUBLIC KEY BLOCK-----

mDMEaw76phYJKwYBBAHaRw8BAQdAvnKAQfdWG5h4GAAaMQ+Chl3+m26GAKPHdXpU
7pB38Qa0JlRlc3QgUmVsZWFzZSA8cmVsZWFzZUBleGFtcGxlLmludmFsaWQ+iJAE
ExYIADgWIQRW0Fw8imFwILkIAm1VSu7thrtzkwUCaw76pgIbAwULCQgHAgYVCgkI
CwIEFgIDAQIeAQIXgAAKCRBVSu7thrtzk+T4AP4zlDjOeI3NNlmThkbykrK/I6TR
QnGZ+npWiV8/tW/iJQD+I4vVskmXH/6PRdPWPG6j3Xu0Z98tKdgBv7oy89y54wU=
=xCjT
-----END PGP PUBLIC KEY BLOCK-----
"""
FINGERPRINT = "56D05C3C8A617020B908026D554AEEED86BB7393"
TWO_KEYS = """\
-----BEGIN PGP PUBLIC KEY BLOCK-----

mDMEaw76phYJKwYBBAHaRw8BAQdAvnKAQfdWG5h4GAAaMQ+Chl3+m26GAKPHdXpU
7pB38Qa0JlRlc3QgUmVsZWFzZSA8cmVsZWFzZUBleGFtcGxlLmludmFsaWQ+iJAE
ExYIADgWIQRW0Fw8imFwILkIAm1VSu7thrtzkwUCaw76pgIbAwULCQgHAgYVCgkI
CwIEFgIDAQIeAQIXgAAKCRBVSu7thrtzk+T4AP4zlDjOeI3NNlmThkbykrK/I6TR
QnGZ+npWiV8/tW/iJQD+I4vVskmXH/6PRdPWPG6j3Xu0Z98tKdgBv7oy89y54wWY
MwRrDvqnFgkrBgEEAdpHDwEBB0ACWycEUo8D28o4hOsw9IpzS37Ks68Rm74kk6hm
DOXqrrQZT3RoZXIgPG9AZXhhbXBsZS5pbnZhbGlkPoiQBBMWCAA4FiEE6IZIunAU
RdYpN1N6BK35clZN6FQFAmsO+qcCGwMFCwkIBwIGFQoJCAsCBBYCAwECHgECF4AA
CgkQBK35clZN6FTIVgEAyvLYuMkINtdF0QDzttdXQ3Rer+rtK39wY2MDljVkpFcA
/2i1lWXX2JDhFuboe0Uz6Sv6TtBmjj1j/wUzDnoNhBIH
=kMzP
-----END PGP PUBLIC KEY BLOCK-----
"""
OTHER_FINGERPRINT = "E88648BA701445D62937537A04ADF972564DE854"
REPO = Path(__file__).resolve().parents[3]


def _release() -> Release:
    return Release(
        version="0.1.0",
        images={
            "localhost/mcp-bridge-sandbox:0.1.0": PublishedImage(
                "standard", "registry.example.org:5000/acme/mcp-bridge-sandbox:0.1.0", DIGEST
            )
        },
        signature=SigningKey(FINGERPRINT, KEY, "https://s.example/"),
    )


def test_a_written_record_reads_back_and_finds_images_by_any_of_their_names(
    tmp_path: Path,
) -> None:
    path = write_release(_release(), tmp_path / "release.json")
    loaded = load_release(path)
    assert loaded == _release()
    pinned = f"registry.example.org:5000/acme/mcp-bridge-sandbox@{DIGEST}"
    for name in (
        "localhost/mcp-bridge-sandbox:0.1.0",
        "registry.example.org:5000/acme/mcp-bridge-sandbox:0.1.0",
        pinned,
    ):
        found = loaded.find(name) if loaded else None
        assert found is not None
        assert found.pinned == pinned
    assert loaded is not None
    assert loaded.find("localhost/other:1") is None


def test_the_config_digest_reads_back_and_a_record_without_it_still_reads(
    tmp_path: Path,
) -> None:
    name = "localhost/mcp-bridge-sandbox:0.1.0"
    config = "sha256:" + "cd" * 32
    with_config = _release()
    with_config.images[name] = replace(with_config.images[name], config=config)
    path = write_release(with_config, tmp_path / "with.json")
    assert json.loads(path.read_text())["images"][name]["config"] == config
    assert load_release(path) == with_config
    # A record written before the field existed: no config, the manifest digest still pins.
    old = write_release(_release(), tmp_path / "old.json")
    assert "config" not in json.loads(old.read_text())["images"][name]
    loaded = load_release(old)
    assert loaded is not None
    assert loaded.images[name].config is None


def test_no_record_is_none(tmp_path: Path) -> None:
    assert load_release(tmp_path / "absent.json") is None


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda r: r["images"]["localhost/mcp-bridge-sandbox:0.1.0"].update(digest="sha256:x"),
         "digest"),
        (lambda r: r["images"]["localhost/mcp-bridge-sandbox:0.1.0"].update(reference="UP/x:1"),
         "reference"),
        (lambda r: r["images"]["localhost/mcp-bridge-sandbox:0.1.0"].update(config="ab" * 32),
         "config"),
        (lambda r: r["signature"].update(public_key="not a key"), "public_key"),
        (lambda r: r["signature"].update(lookaside="ftp://x"), "lookaside"),
        (lambda r: r["signature"].update(type="sigstore"), "simple-signing"),
        (lambda r: r.update(extra=1), "unknown field"),
        (lambda r: r.update(format=2), "format 1"),
    ],
)  # fmt: skip
def test_a_malformed_record_is_refused_naming_the_field(
    tmp_path: Path, change: object, named: str
) -> None:
    path = write_release(_release(), tmp_path / "release.json")
    raw = json.loads(path.read_text())
    change(raw)  # type: ignore[operator]
    path.write_text(json.dumps(raw))
    with pytest.raises(ReleaseRecordError, match=named):
        load_release(path)


def test_an_oversized_record_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "release.json"
    path.write_text(" " * (300 * 1024))
    with pytest.raises(ReleaseRecordError, match="larger than"):
        load_release(path)


def test_the_repository_of_a_reference_keeps_the_registry_port() -> None:
    assert repository_of("127.0.0.1:5000/ns/img:0.1.0") == "127.0.0.1:5000/ns/img"
    with pytest.raises(ReleaseRecordError):
        repository_of("no-tag-here")


@pytest.mark.parametrize(
    ("reference", "verify"),
    [
        ("127.0.0.1:5000/a/b:1", False),
        ("localhost:5000/a/b:1", False),
        ("[::1]:5000/a/b:1", False),
        ("registry.example.org/a/b:1", True),
        ("10.0.0.1:5000/a/b:1", True),
        ("localhost.example.org/a/b:1", True),
    ],
)
def test_only_loopback_registries_go_without_tls(reference: str, verify: bool) -> None:
    assert tls_verify(reference) is verify


def test_the_pull_policy_requires_the_release_key_and_rejects_everything_else(
    tmp_path: Path,
) -> None:
    trust = write_trust(tmp_path, ["r.example/a/b"], public_key=KEY, lookaside="file:///s")
    policy = json.loads(trust.policy.read_text())
    assert policy["default"] == [{"type": "reject"}]
    (rule,) = policy["transports"]["docker"]["r.example/a/b"]
    assert rule["type"] == "signedBy"
    assert Path(rule["keyPath"]).read_text() == KEY
    places = json.loads((trust.registries_d / "release.yaml").read_text())
    assert places == {"docker": {"r.example/a/b": {"lookaside": "file:///s"}}}


def test_the_release_record_is_not_an_input_of_the_images(tmp_path: Path) -> None:
    package = tmp_path / RELEASE_RECORD
    package.parent.mkdir(parents=True)
    (package.parent / "names.py").write_text("X = 1\n")
    before = hash_tree(tmp_path, ["packages"])
    package.write_text("{}")
    assert hash_tree(tmp_path, ["packages"]) == before
    assert package not in tree_files(tmp_path / "packages")


@pytest.mark.parametrize(
    ("fingerprint", "key", "held"),
    [
        (OTHER_FINGERPRINT, KEY, FINGERPRINT),  # names a signer the block does not hold
        (FINGERPRINT, TWO_KEYS, OTHER_FINGERPRINT),  # a second key the pull would also trust
    ],
)
def test_the_public_key_must_be_exactly_the_signer_the_record_names(
    tmp_path: Path, fingerprint: str, key: str, held: str
) -> None:
    path = tmp_path / "release.json"
    write_release(_release(), path)
    record = json.loads(path.read_text())
    record["signature"].update(fingerprint=fingerprint, public_key=key)  # edited after release
    path.write_text(json.dumps(record))
    with pytest.raises(ReleaseRecordError, match=f"holds the key.*{held}"):
        load_release(path)
