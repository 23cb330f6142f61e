"""configure(): where spans go and what they capture; force_flush() and shutdown().

Exporter and SDK modules are imported here, lazily, so importing the package stays cheap and
code that is only decorated (never configured) needs nothing beyond the OpenTelemetry API.
"""

import json
import math
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from opentelemetry import trace

from agenttrail.instrumentation._capture import RedactHook, make_settings
from agenttrail.instrumentation._errors import logger
from agenttrail.instrumentation._state import STATE, TRACER_NAME

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

PROTOCOLS: Final = ("grpc", "http/protobuf")
# Checked in this order when protocol= is not given, as the OTLP exporter specification says.
PROTOCOL_ENV_VARS: Final = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
# Extra secret key patterns when configure() is given none: comma-separated, or a JSON list of
# strings for patterns that contain commas ('["a{1,3}b", "^pin$"]').
SCRUB_PATTERNS_ENV: Final = "AGENTTRAIL_SCRUB_PATTERNS"


def _scrub_patterns_from_env() -> list[str] | None:
    value = os.environ.get(SCRUB_PATTERNS_ENV, "").strip()
    if not value:
        return None
    if value.startswith("["):
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None  # a pattern that starts with a character class, not a JSON list
        if isinstance(parsed, list):
            return parsed
    return [p.strip() for p in value.split(",") if p.strip()]


def _resolve_protocol(protocol: str | None) -> str:
    """argument > OTEL_EXPORTER_OTLP_TRACES_PROTOCOL > OTEL_EXPORTER_OTLP_PROTOCOL > grpc."""
    source, value = "protocol", protocol
    if value is None:
        source, value = next(
            ((v, os.environ[v]) for v in PROTOCOL_ENV_VARS if os.environ.get(v)), ("", "grpc")
        )
    if value not in PROTOCOLS:
        raise ValueError(f"{source} must be one of {', '.join(PROTOCOLS)}; got {value!r}")
    return value


def _check_sample_rate(sample_rate: float | None) -> None:
    if sample_rate is None:
        return
    if (
        isinstance(sample_rate, bool)
        or not isinstance(sample_rate, int | float)
        or not math.isfinite(sample_rate)
        or not 0.0 <= sample_rate <= 1.0
    ):
        raise ValueError(f"sample_rate must be a number from 0.0 to 1.0; got {sample_rate!r}")


def _check_headers(headers: Mapping[str, str] | None) -> None:
    if headers is None:
        return
    if not isinstance(headers, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise ValueError(f"headers must be a mapping of str to str; got {headers!r}")


def _make_exporter(protocol: str, endpoint: str | None, headers: Mapping[str, str] | None) -> "SpanExporter":
    """The OTLP exporter; endpoint/headers are passed only when given, so OTEL_* variables apply."""
    kwargs: dict[str, Any] = {}
    if headers is not None:
        kwargs["headers"] = dict(headers)
    if protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HTTPExporter

        if endpoint is not None:
            # A bare collector address ("http://host:4318") gets the traces path the exporter
            # would add to OTEL_EXPORTER_OTLP_ENDPOINT itself.
            kwargs["endpoint"] = (
                endpoint.rstrip("/") + "/v1/traces" if urlsplit(endpoint).path in ("", "/") else endpoint
            )
        return HTTPExporter(**kwargs)
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GRPCExporter

    if endpoint is not None:
        kwargs["endpoint"] = endpoint
    return GRPCExporter(**kwargs)


def configure(
    service_name: str | None = None,
    endpoint: str | None = None,
    protocol: str | None = None,
    headers: Mapping[str, str] | None = None,
    tracer_provider: trace.TracerProvider | None = None,
    sample_rate: float | None = None,
    capture: bool = True,
    max_value_length: int = 8192,
    redact: RedactHook | None = None,
    scrub_patterns: Iterable[str] | None = None,
) -> trace.TracerProvider:
    """Send agenttrail's spans somewhere and set what they capture; returns the provider used.

    Joins ``tracer_provider`` if given, else the global provider the application installed;
    otherwise creates an SDK provider exporting over OTLP (gRPC, or ``http/protobuf`` by
    ``protocol`` / ``OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL``) and installs it globally. Unset
    ``endpoint``, ``headers`` and ``sample_rate`` leave the standard OTEL_* variables in charge.
    ``capture=False`` records no arguments, results, inputs or outputs; ``redact(kind, name,
    value)`` rewrites values before secrets are scrubbed: values under secret keys (the default
    key patterns plus ``scrub_patterns``, else those in AGENTTRAIL_SCRUB_PATTERNS), ``name=value``
    pairs with such names and secret-shaped strings in any text; then values are cut to
    ``max_value_length`` characters. Exception messages and stack traces are scrubbed too.
    Raises ValueError naming the parameter or variable with a bad value; nothing changes then.
    """
    source = "scrub_patterns"
    if scrub_patterns is None:
        scrub_patterns, source = _scrub_patterns_from_env(), SCRUB_PATTERNS_ENV
    settings = make_settings(
        enabled=capture,
        max_value_length=max_value_length,
        redact=redact,
        scrub_patterns=scrub_patterns,
        scrub_source=source,
    )
    _check_sample_rate(sample_rate)
    _check_headers(headers)
    resolved = _resolve_protocol(protocol)

    owns = False
    provider = tracer_provider
    if provider is None:
        installed = trace.get_tracer_provider()
        if not isinstance(installed, trace.ProxyTracerProvider):
            provider = installed
    if provider is not None:
        exporter_settings = {
            "service_name": service_name,
            "endpoint": endpoint,
            "protocol": protocol,
            "headers": headers,
            "sample_rate": sample_rate,
        }
        ignored = [k for k, v in exporter_settings.items() if v is not None]
        if ignored:
            logger.warning(
                "agenttrail: joining an existing tracer provider; %s apply only to one agenttrail "
                "creates and are ignored",
                ", ".join(ignored),
            )
    else:
        provider = _create_provider(service_name, resolved, endpoint, headers, sample_rate)
        trace.set_tracer_provider(provider)
        owns = True

    STATE.tracer = provider.get_tracer(TRACER_NAME)
    STATE.provider = provider
    STATE.owns_provider = owns
    STATE.settings = settings
    return provider


def _create_provider(
    service_name: str | None,
    protocol: str,
    endpoint: str | None,
    headers: Mapping[str, str] | None,
    sample_rate: float | None,
) -> trace.TracerProvider:
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    resource = Resource.create({} if service_name is None else {SERVICE_NAME: service_name})
    # No sampler given: the SDK reads OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG itself.
    sampler = None if sample_rate is None else ParentBased(TraceIdRatioBased(sample_rate))
    provider = TracerProvider(sampler=sampler, resource=resource)
    provider.add_span_processor(BatchSpanProcessor(_make_exporter(protocol, endpoint, headers)))
    return provider


def _provider_call(method: str, *args: Any) -> Any:
    provider = STATE.provider or trace.get_tracer_provider()
    func = getattr(provider, method, None)
    return func(*args) if callable(func) else None


def force_flush(timeout_millis: int = 30_000) -> bool:
    """Export the spans still buffered; False if that did not finish in time."""
    return _provider_call("force_flush", timeout_millis) is not False


def shutdown() -> None:
    """Flush, and shut down the provider if configure() created it (a joined one is left running)."""
    if STATE.owns_provider:
        _provider_call("shutdown")
    else:
        force_flush()
