import { Metadata } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { TestRepository } from "../fixtures/repository.js";
import { startServer, type ServerProcess } from "../fixtures/server.js";
import { identityRequest } from "../fixtures/requests.js";

interface ExportedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes: { key: string; value: { stringValue?: string } }[];
  status?: { code?: number; message?: string };
  service: string;
}

/**
 * Where the data planes export traces: an OTLP/HTTP endpoint that keeps what it receives
 * (OTLP JSON, as the OpenTelemetry exporter sends by default).
 */
async function otlpSink(): Promise<{ server: Server; url: string; spans: ExportedSpan[] }> {
  const spans: ExportedSpan[] = [];
  const server = createServer((request, response) => {
    let body = "";
    request.on("data", (chunk: Buffer) => (body += chunk.toString()));
    request.on("end", () => {
      const payload = JSON.parse(body) as {
        resourceSpans: {
          resource: { attributes: { key: string; value: { stringValue?: string } }[] };
          scopeSpans: { spans: Omit<ExportedSpan, "service">[] }[];
        }[];
      };
      for (const resource of payload.resourceSpans) {
        const service =
          resource.resource.attributes.find((attribute) => attribute.key === "service.name")?.value.stringValue ?? "";
        for (const scope of resource.scopeSpans) for (const span of scope.spans) spans.push({ ...span, service });
      }
      response.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`, spans };
}

const FORWARD = (upstream: string) => `
name: "forwarded"
backend: "kserve-grpc"
parameters { key: "upstream" value { string_value: "${upstream}" } }
parameters { key: "upstream_model" value { string_value: "identity_fp32" } }
`;

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN = "00f067aa0ba902b7";
/** A second trace, sent over the HTTP front door. */
const HTTP_TRACE_ID = "5cf92f3577b34da6a3ce929d0e0e4737";
const HTTP_CLIENT_SPAN = "11f067aa0ba902b8";

describe("OpenTelemetry tracing over OTLP (two data planes, one forwarding to the other)", function () {
  this.timeout(30_000);
  let sink: Awaited<ReturnType<typeof otlpSink>>;
  let upstream: ServerProcess;
  let front: ServerProcess;
  let repository: TestRepository;

  before(async () => {
    sink = await otlpSink();
    upstream = await startServer(["--otlp-traces-endpoint", sink.url, "--otel-service-name", "upstream-plane"]);
    repository = new TestRepository({ forwarded: FORWARD(`127.0.0.1:${upstream.grpcPort}`) });
    front = await startServer([
      "--model-repository",
      repository.dir,
      "--otlp-traces-endpoint",
      sink.url,
      "--otel-service-name",
      "front-plane",
    ]);
  });
  after(async () => {
    await front?.stop();
    await upstream?.stop();
    repository?.remove();
    sink?.server.close();
  });

  it("records one span per request in the caller's trace (gRPC metadata or HTTP header), and carries the context upstream", async () => {
    const metadata = new Metadata();
    metadata.set("traceparent", `00-${TRACE_ID}-${CLIENT_SPAN}-01`);
    await new Promise<void>((resolve, reject) =>
      front.client.modelInfer(identityRequest({ model: "forwarded", id: "traced-1", width: 2 }), metadata, (error) =>
        error ? reject(error) : resolve(),
      ),
    );
    const missing = new Promise<void>((resolve) =>
      front.client.modelInfer(
        identityRequest({ model: "no_such_model", id: "traced-1", width: 2 }),
        new Metadata(),
        () => resolve(),
      ),
    );
    await missing;
    // The same over HTTP: a W3C traceparent header in, the context carried on over gRPC.
    const rest = await fetch(`http://127.0.0.1:${front.httpPort}/v2/models/forwarded/infer`, {
      method: "POST",
      headers: { "content-type": "application/json", traceparent: `00-${HTTP_TRACE_ID}-${HTTP_CLIENT_SPAN}-01` },
      body: JSON.stringify({
        id: "traced-http",
        inputs: [{ name: "INPUT0", shape: [1, 2], datatype: "FP32", data: [1, 2] }],
      }),
    });
    assert.equal(rest.status, 200, await rest.clone().text());
    // Stopping flushes the span batches.
    await front.stop();
    await upstream.stop();
    const inTrace = sink.spans.filter((span) => span.traceId === TRACE_ID);
    const frontSpan = inTrace.find((span) => span.service === "front-plane");
    const upstreamSpan = inTrace.find((span) => span.service === "upstream-plane");
    assert.ok(frontSpan && upstreamSpan, JSON.stringify(sink.spans.map((span) => [span.service, span.traceId])));
    assert.equal(frontSpan.parentSpanId, CLIENT_SPAN, "the front span continues the client's trace");
    assert.equal(upstreamSpan.parentSpanId, frontSpan.spanId, "the upstream span is the front span's child");
    assert.equal(frontSpan.name, "ModelInfer");
    const attribute = (span: ExportedSpan, key: string) =>
      span.attributes.find((item) => item.key === key)?.value.stringValue;
    assert.equal(attribute(frontSpan, "model.name"), "forwarded");
    assert.equal(attribute(upstreamSpan, "model.name"), "identity_fp32");
    assert.equal(attribute(frontSpan, "request.id"), "traced-1");
    const failed = sink.spans.find((span) => attribute(span, "model.name") === "no_such_model");
    assert.equal(failed?.status?.code, 2, "a failed request's span has status ERROR");
    assert.match(failed?.status?.message ?? "", /not found/);

    const httpTrace = sink.spans.filter((span) => span.traceId === HTTP_TRACE_ID);
    const httpFront = httpTrace.find((span) => span.service === "front-plane");
    const httpUpstream = httpTrace.find((span) => span.service === "upstream-plane");
    assert.ok(httpFront && httpUpstream, JSON.stringify(httpTrace));
    assert.equal(httpFront.name, "infer");
    assert.equal(attribute(httpFront, "http.route"), "infer");
    assert.equal(httpFront.parentSpanId, HTTP_CLIENT_SPAN, "the front span continues the HTTP client's trace");
    assert.equal(httpUpstream.parentSpanId, httpFront.spanId, "and hands it on upstream over gRPC");
  });
});
