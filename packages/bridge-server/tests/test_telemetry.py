"""The OTLP trace export read from the standard OTEL_* variables: off unless an endpoint is set,
and then nothing of the SDK before; problems name the variable, never its value."""

from __future__ import annotations

import io
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from bridge_core.redaction import Redactor
from mcp_code_execution_mode import doctor
from mcp_code_execution_mode._doctor_report import Report
from mcp_code_execution_mode._logging import also_mask, configure_logging, mask_logs
from mcp_code_execution_mode._telemetry import trace_export_from_env
from mcp_code_execution_mode.settings import SettingsError

ENDPOINT = "http://collector.example:4318"
ENDPOINT_VARIABLE = "OTEL_EXPORTER_OTLP_ENDPOINT"
HEADERS_VARIABLE = "OTEL_EXPORTER_OTLP_HEADERS"


@pytest.mark.parametrize(
    "environ",
    [
        {},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "  "},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT, "OTEL_SDK_DISABLED": "true"},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT, "OTEL_TRACES_EXPORTER": "none"},
    ],
)
def test_traces_are_off_without_an_endpoint_or_when_turned_off(environ: dict[str, str]) -> None:
    assert trace_export_from_env(environ) is None


def test_the_traces_endpoint_wins_over_the_general_one() -> None:
    export = trace_export_from_env({
        "OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT,
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{ENDPOINT}/v1/traces",
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
    })  # fmt: skip
    assert export is not None
    assert export.endpoint_variable == "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"


@pytest.mark.parametrize(
    ("extra", "variable"),
    [
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL"),
        ({"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"),
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:s3cret-pass-77@4318"}, ENDPOINT_VARIABLE),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "ftp://u:s3cret-pass-77@host"}, ENDPOINT_VARIABLE),
        ({"OTEL_EXPORTER_OTLP_HEADERS": "ok=1,Bearer s3cret-pass-77"}, HEADERS_VARIABLE),
    ],
)
def test_what_the_bridge_does_not_do_is_refused_naming_the_variable_not_its_value(
    extra: dict[str, str], variable: str
) -> None:
    with pytest.raises(SettingsError) as refused:
        trace_export_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT, **extra})
    assert refused.value.names == (variable,)
    assert str(refused.value).startswith(variable)
    assert "s3cret-pass-77" not in str(refused.value)


def test_header_values_and_url_credentials_are_secrets() -> None:
    export = trace_export_from_env({
        "OTEL_EXPORTER_OTLP_ENDPOINT": "https://user:url-pass-1234@collector.example/otlp",
        "OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=key%2Fvalue-5678,authorization=Bearer tok-9012ab",
    })  # fmt: skip
    assert export is not None
    for secret in ("url-pass-1234", "key/value-5678", "tok-9012ab"):
        assert any(secret in s for s in export.secrets), secret


def test_a_bridge_without_an_endpoint_imports_no_sdk_and_starts_no_thread() -> None:
    code = """
import sys, threading, anyio
from mcp_code_execution_mode._compose import executor_factory
from mcp_code_execution_mode._telemetry import exporting_traces, trace_export_from_env
from bridge_core import tracing

async def main():
    async with exporting_traces(trace_export_from_env()):
        print(tracing.enabled(), threading.active_count())

anyio.run(main)
loaded = ("opentelemetry.sdk", "opentelemetry.exporter", "google.protobuf")
print(sorted(m for m in sys.modules if m.startswith(loaded)))
"""
    env = {"PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env,
        check=True,
    )  # fmt: skip
    assert done.stdout.split("\n")[:2] == ["False 1", "[]"], done.stdout


def test_doctor_says_whether_traces_are_exported_and_names_a_bad_variable() -> None:
    lines = []
    for environ in (
        {},
        {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://user:doctor-secret-42@host:4318/v1/traces"},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "doctor-secret-42"},
    ):
        out = io.StringIO()
        doctor._check_traces(Report(out), environ)
        lines.append(out.getvalue())
    off, on, bad = lines
    assert off.startswith("[ok]   traces: off")
    assert on.startswith("[ok]   traces: exported over OTLP/HTTP (endpoint from")
    assert bad.startswith("[FAIL] traces: OTEL_EXPORTER_OTLP_ENDPOINT is not")
    assert "doctor-secret-42" not in on + bad


def test_the_exporters_secrets_are_masked_in_the_log_whatever_discovery_sets_later(
    tmp_path: Path,
) -> None:
    export = trace_export_from_env({
        "OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT,
        "OTEL_EXPORTER_OTLP_HEADERS": "x-honeycomb-team=hc-key-0a1b2c3d4e",
    })  # fmt: skip
    assert export is not None
    log = tmp_path / "bridge.log"
    configure_logging("info", log)
    try:
        also_mask(export.secrets)
        mask_logs(Redactor(["server-secret-778899"]))  # what discovery sets, afterwards
        logging.getLogger("test").warning("sent hc-key-0a1b2c3d4e and server-secret-778899")
    finally:
        logging.basicConfig(handlers=[logging.NullHandler()], force=True)
    text = log.read_text()
    assert "sent *** and ***" in text
