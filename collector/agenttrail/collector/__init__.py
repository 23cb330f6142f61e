"""The sidecar's collector: OTLP receivers, span storage in ClickHouse, trajectory assembly."""
