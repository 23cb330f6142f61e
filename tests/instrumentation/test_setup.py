"""configure(): joining providers, creating one from arguments and OTEL_* variables, clear errors."""

import logging
import math
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agenttrail.instrumentation import configure, force_flush, shutdown, tool
from agenttrail.instrumentation._state import STATE


class FakeExporter(SpanExporter):
    """Stands in for an OTLP exporter class and remembers how it was built."""

    built: ClassVar[list[tuple[str, dict[str, Any]]]] = []
    protocol = ""

    def __init__(self, **kwargs: Any) -> None:
        self.built.append((self.protocol, kwargs))

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


@pytest.fixture
def fresh_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[trace.TracerProvider]]:
    """No global provider installed yet, fake exporters; yields the providers set as global."""
    installed: list[trace.TracerProvider] = []
    monkeypatch.setattr(trace, "get_tracer_provider", trace.ProxyTracerProvider)
    monkeypatch.setattr(trace, "set_tracer_provider", installed.append)
    for protocol, module in (
        ("grpc", "opentelemetry.exporter.otlp.proto.grpc.trace_exporter"),
        ("http/protobuf", "opentelemetry.exporter.otlp.proto.http.trace_exporter"),
    ):
        monkeypatch.setattr(
            f"{module}.OTLPSpanExporter", type("Fake", (FakeExporter,), {"protocol": protocol})
        )
    for var in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_TRACES_SAMPLER"):
        monkeypatch.delenv(var, raising=False)
    FakeExporter.built = []
    saved = STATE.snapshot()
    yield installed
    STATE.restore(saved)
    for provider in installed:
        assert isinstance(provider, TracerProvider)
        provider.shutdown()


def test_joins_a_given_provider_without_touching_the_global(monkeypatch: pytest.MonkeyPatch) -> None:
    """With tracer_provider= our spans go there; no exporter is added and no global is set."""
    monkeypatch.setattr(trace, "set_tracer_provider", lambda p: pytest.fail("global provider set"))
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    saved = STATE.snapshot()
    try:
        assert configure(tracer_provider=provider) is provider

        @tool
        def ping() -> str:
            return "pong"

        ping()
    finally:
        STATE.restore(saved)
    assert [s.name for s in exporter.get_finished_spans()] == ["execute_tool ping"]


def test_joining_warns_about_exporter_settings(caplog: pytest.LogCaptureFixture) -> None:
    """Exporter settings passed while joining an existing provider are reported as ignored."""
    saved = STATE.snapshot()
    try:
        configure(tracer_provider=TracerProvider(), endpoint="localhost:4317", sample_rate=0.5)
    finally:
        STATE.restore(saved)
    assert "endpoint, sample_rate apply only to one agenttrail creates" in caplog.text


def test_joins_the_provider_the_application_installed(
    fresh_process: list[trace.TracerProvider], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An SDK provider already installed globally is joined rather than replaced."""
    app_provider = TracerProvider()
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: app_provider)
    assert configure(service_name="svc") is app_provider
    assert fresh_process == []
    assert FakeExporter.built == []


def test_creates_grpc_provider_by_default(fresh_process: list[trace.TracerProvider]) -> None:
    """No provider anywhere: an SDK provider with service.name, OTLP gRPC and no endpoint/header overrides."""
    provider = configure(service_name="support-bot")
    assert fresh_process == [provider]
    assert isinstance(provider, TracerProvider)
    assert provider.resource.attributes["service.name"] == "support-bot"
    assert FakeExporter.built == [("grpc", {})]
    assert STATE.owns_provider


def test_creates_http_provider_with_endpoint_headers_and_rate(
    fresh_process: list[trace.TracerProvider],
) -> None:
    """protocol/endpoint/headers/sample_rate reach the exporter and a ParentBased ratio sampler."""
    provider = configure(
        protocol="http/protobuf", endpoint="http://127.0.0.1:4318", headers={"x-key": "v"}, sample_rate=0.25
    )
    assert FakeExporter.built == [
        ("http/protobuf", {"endpoint": "http://127.0.0.1:4318/v1/traces", "headers": {"x-key": "v"}})
    ]
    assert isinstance(provider, TracerProvider)
    description = provider.sampler.get_description()
    assert description.startswith("ParentBased{root:TraceIdRatioBased{0.25}")


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, "http/protobuf"),
        (
            {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
            "grpc",
        ),
    ],
)
def test_protocol_from_environment(
    fresh_process: list[trace.TracerProvider],
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    expected: str,
) -> None:
    """The traces-specific protocol variable wins over the generic one."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    configure()
    assert [protocol for protocol, _ in FakeExporter.built] == [expected]


def test_sampler_left_to_the_environment(
    fresh_process: list[trace.TracerProvider], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without sample_rate the SDK default sampler applies, so OTEL_TRACES_SAMPLER is honoured."""
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    provider = configure()
    assert isinstance(provider, TracerProvider)
    assert provider.sampler.get_description() == "AlwaysOffSampler"


def test_shutdown_and_flush_the_created_provider(fresh_process: list[trace.TracerProvider]) -> None:
    """force_flush() succeeds and shutdown() shuts down a provider configure() created."""
    configure()
    assert force_flush(timeout_millis=1000) is True
    shutdown()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"protocol": "foo"}, "protocol must be one of grpc, http/protobuf; got 'foo'"),
        ({"sample_rate": 2}, "sample_rate must be a number from 0.0 to 1.0; got 2"),
        ({"sample_rate": -0.1}, "sample_rate must be"),
        ({"sample_rate": math.nan}, "sample_rate must be"),
        ({"sample_rate": True}, "sample_rate must be"),
        ({"sample_rate": "0.5"}, "sample_rate must be"),
        ({"max_value_length": 0}, "max_value_length must be a positive int"),
        ({"capture": "yes"}, "capture must be True or False"),
        ({"scrub_patterns": "password"}, "scrub_patterns must be a list"),
        ({"scrub_patterns": ["("]}, "scrub_patterns[0] '(' is not a valid regular expression"),
        ({"headers": {"x-key": 1}}, "headers must be a mapping of str to str"),
        ({"redact": "not callable"}, "redact must be a callable"),
    ],
)
def test_bad_values_raise_naming_the_parameter(kwargs: dict[str, Any], message: str) -> None:
    """A bad argument raises ValueError naming it and the accepted values, and changes nothing."""
    before = STATE.snapshot()
    with pytest.raises(ValueError, match=re.escape(message)):
        configure(**kwargs)
    assert STATE.snapshot() == before


@pytest.mark.parametrize("var", ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"])
def test_bad_protocol_variable_is_named(monkeypatch: pytest.MonkeyPatch, var: str) -> None:
    """A bad protocol in the environment raises ValueError naming the variable."""
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", raising=False)
    monkeypatch.setenv(var, "http/json")
    with pytest.raises(ValueError, match=f"{var} must be one of grpc, http/protobuf; got 'http/json'"):
        configure()


def test_configure_installs_global_provider_in_a_fresh_process() -> None:
    """In a real fresh interpreter configure() creates and installs the global SDK provider."""
    code = (
        "from opentelemetry import trace\n"
        "from agenttrail.instrumentation import configure, shutdown\n"
        "provider = configure(service_name='svc')\n"
        "assert trace.get_tracer_provider() is provider, trace.get_tracer_provider()\n"
        "assert type(provider).__module__ == 'opentelemetry.sdk.trace'\n"
        "shutdown()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr


def test_decorated_code_works_without_configure() -> None:
    """Unconfigured, decorated calls go to the global provider, even one installed after decoration."""
    code = (
        "from agenttrail.instrumentation import tool\n"
        "@tool\n"
        "def ping() -> int:\n"
        "    return 1\n"
        "assert ping() == 1  # no provider yet: a no-op span\n"
        "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter\n"
        "exporter = InMemorySpanExporter()\n"
        "provider = TracerProvider()\n"
        "provider.add_span_processor(SimpleSpanProcessor(exporter))\n"
        "trace.set_tracer_provider(provider)\n"
        "ping()\n"
        "assert [s.name for s in exporter.get_finished_spans()] == ['execute_tool ping']\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr


def test_log_messages_use_the_package_logger(caplog: pytest.LogCaptureFixture) -> None:
    """Warnings come from the `agenttrail.instrumentation` logger, so users can route them."""
    caplog.set_level(logging.WARNING)
    saved = STATE.snapshot()
    try:
        configure(tracer_provider=TracerProvider(), service_name="x")
    finally:
        STATE.restore(saved)
    assert {r.name for r in caplog.records} == {"agenttrail.instrumentation"}
