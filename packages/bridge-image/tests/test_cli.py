import sys

import pytest
from bridge_image import DEFAULT_IMAGE, SLIM_IMAGE
from bridge_image._run import run_streamed
from bridge_image.builder import OFFLINE_ENV, default_offline
from bridge_image.cli import main
from bridge_image.errors import BuildFailed


def test_tag_prints_the_standard_image_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tag"]) == 0
    assert capsys.readouterr().out.strip() == DEFAULT_IMAGE


def test_tag_slim_prints_the_slim_image_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["tag", "--slim"]) == 0
    assert capsys.readouterr().out.strip() == SLIM_IMAGE


def test_an_unknown_variant_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["build", "--variant", "gpu"])
    assert exited.value.code == 2
    assert "gpu" in capsys.readouterr().err


def test_streamed_output_reaches_progress_line_by_line() -> None:
    seen: list[str] = []
    lines = run_streamed(
        # -u: unbuffered stdout, so the child itself writes 'one' before 'two'.
        [sys.executable, "-u", "-c", "import sys; print('one'); print('two', file=sys.stderr)"],
        progress=seen.append,
        what="printing",
    )
    assert lines == seen == ["one", "two"]


def test_a_failing_step_names_itself_and_quotes_its_last_output() -> None:
    with pytest.raises(BuildFailed, match=r"(?s)frobnicating failed \(exit 3\).*boom"):
        run_streamed(
            [sys.executable, "-c", "print('boom'); raise SystemExit(3)"],
            progress=None,
            what="frobnicating",
        )


def test_an_explicit_path_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(OFFLINE_ENV, "1")
    assert default_offline(False) is False
    monkeypatch.setenv(OFFLINE_ENV, "0")
    assert default_offline(True) is True


def test_the_environment_selects_the_path_when_no_flag_is_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(OFFLINE_ENV, "1")
    assert default_offline() is True
    monkeypatch.setenv(OFFLINE_ENV, "0")
    assert default_offline() is False
