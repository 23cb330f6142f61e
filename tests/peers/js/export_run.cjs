// One agent run exported by the OpenTelemetry JS SDK to an agenttrail sidecar, as a Node agent
// would: an `invoke_agent` span with two `execute_tool` children (spec/telemetry.md).
//
// usage: node export_run.cjs <http/json|http/protobuf|grpc> <endpoint> <none|gzip> [token]
// Prints {"traceId": ...} and exits 0 once the exporter reported success; exits 1 with the
// exporter's error otherwise. Modules come from NODE_PATH (.peers/js/node_modules).
"use strict";

const { context, trace, SpanKind } = require("@opentelemetry/api");
const { NodeTracerProvider } = require("@opentelemetry/sdk-trace-node");
const { BatchSpanProcessor } = require("@opentelemetry/sdk-trace-base");
const { resourceFromAttributes } = require("@opentelemetry/resources");

const [protocol, endpoint, compression, token] = process.argv.slice(2);

function makeExporter() {
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  if (protocol === "http/json") {
    const { OTLPTraceExporter } = require("@opentelemetry/exporter-trace-otlp-http");
    return new OTLPTraceExporter({ url: `${endpoint}/v1/traces`, compression, headers });
  }
  if (protocol === "http/protobuf") {
    const { OTLPTraceExporter } = require("@opentelemetry/exporter-trace-otlp-proto");
    return new OTLPTraceExporter({ url: `${endpoint}/v1/traces`, compression, headers });
  }
  if (protocol === "grpc") {
    const { OTLPTraceExporter } = require("@opentelemetry/exporter-trace-otlp-grpc");
    const { Metadata } = require("@grpc/grpc-js");
    const metadata = new Metadata();
    if (token) metadata.set("authorization", `Bearer ${token}`);
    return new OTLPTraceExporter({ url: endpoint, compression, metadata });
  }
  throw new Error(`unknown protocol ${protocol}`);
}

// Records what the real exporter reports, so a refused export fails this script.
class Recording {
  constructor(inner) {
    this.inner = inner;
    this.failures = [];
    this.exported = 0;
  }
  export(spans, done) {
    this.inner.export(spans, (result) => {
      if (result.code === 0) this.exported += spans.length;
      else this.failures.push(String(result.error || `code ${result.code}`));
      done(result);
    });
  }
  shutdown() {
    return this.inner.shutdown();
  }
  forceFlush() {
    return this.inner.forceFlush ? this.inner.forceFlush() : Promise.resolve();
  }
}

async function main() {
  const exporter = new Recording(makeExporter());
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ "service.name": "js-support-agent" }),
    spanProcessors: [new BatchSpanProcessor(exporter)],
  });
  const tracer = provider.getTracer("agenttrail-js-peer");
  const root = tracer.startSpan("invoke_agent js-agent", {
    kind: SpanKind.INTERNAL,
    attributes: {
      "gen_ai.operation.name": "invoke_agent",
      "gen_ai.agent.name": "js-agent",
      "agenttrail.task": `refund-${protocol}`,
    },
  });
  const parent = trace.setSpan(context.active(), root);
  for (const [index, tool] of ["lookup_order", "issue_refund"].entries()) {
    const span = tracer.startSpan(
      `execute_tool ${tool}`,
      {
        kind: SpanKind.INTERNAL,
        attributes: {
          "gen_ai.operation.name": "execute_tool",
          "gen_ai.tool.name": tool,
          "gen_ai.tool.call.id": `call-${index}`,
          "gen_ai.tool.type": "function",
          "gen_ai.tool.call.arguments": JSON.stringify({ order_id: 42 }),
          "gen_ai.tool.call.result": JSON.stringify({ ok: true }),
        },
      },
      parent,
    );
    await new Promise((resolve) => setTimeout(resolve, 5));
    span.end();
  }
  root.end();
  await provider.forceFlush();
  await provider.shutdown();
  if (exporter.failures.length || exporter.exported !== 3) {
    console.error(`export failed (${exporter.exported} spans exported): ${exporter.failures.join("; ")}`);
    process.exit(1);
  }
  console.log(JSON.stringify({ traceId: root.spanContext().traceId }));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
