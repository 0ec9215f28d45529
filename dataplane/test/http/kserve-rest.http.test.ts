import assert from "node:assert/strict";
import { gzipSync } from "node:zlib";
import { scrape, valueOf } from "../../../e2e/support/prometheus.js";
import { IDENTITY_ALL_TYPES } from "../fixtures/repository.js";
import { useServer } from "../fixtures/serving.js";

/**
 * KServe v2 REST on the front door, as a client without tritonclient sees it: JSON and
 * binary bodies, compression, and every kind of bad input answered with the right status
 * and a message naming the field, while other clients' requests keep succeeding.
 */

const MAX_BODY = 64 * 1024;

/** A request to identity_fp32 with one JSON input of `count` values. */
const jsonInfer = (count = 4, extra: Record<string, unknown> = {}): string =>
  JSON.stringify({
    inputs: [{ name: "INPUT0", shape: [1, count], datatype: "FP32", data: Array.from({ length: count }, (_, i) => i) }],
    ...extra,
  });

/** A body with the binary tensor data extension: the JSON header, then `binary`. */
function binaryBody(header: unknown, binary: Buffer): { body: Buffer; headers: Record<string, string> } {
  const json = Buffer.from(JSON.stringify(header));
  return {
    body: Buffer.concat([json, binary]),
    headers: { "inference-header-content-length": String(json.length), "content-type": "application/octet-stream" },
  };
}

describe("KServe v2 REST on the HTTP front door", function () {
  this.timeout(30_000);
  const serving = useServer({ identity_all: IDENTITY_ALL_TYPES }, ["--max-message-size", String(MAX_BODY)]);
  const url = (path: string): string => `http://127.0.0.1:${serving.server.httpPort}${path}`;
  const post = (path: string, body: string | Buffer, headers: Record<string, string> = {}): Promise<Response> =>
    fetch(url(path), { method: "POST", body, headers: { "content-type": "application/json", ...headers } });

  it("answers probes and metadata with the bodies Triton's and KServe's clients read", async () => {
    const live = await fetch(url("/v2/health/live"));
    assert.equal(live.status, 200);
    assert.deepEqual(await live.json(), { live: true });
    assert.deepEqual(await (await fetch(url("/v2/health/ready"))).json(), { ready: true });
    const ready = await fetch(url("/v2/models/identity_fp32/versions/1/ready"));
    assert.equal(ready.status, 200);
    assert.equal((await fetch(url("/v2/models/no_such_model/ready"))).status, 400);
    const server = (await (await fetch(url("/v2"))).json()) as { name: string; extensions: string[] };
    assert.equal(server.name, "dynamo-kserve");
    assert.ok(server.extensions.includes("binary_tensor_data") && server.extensions.includes("generate"));
    const config = (await (await fetch(url("/v2/models/identity_fp32/config"))).json()) as Record<string, unknown>;
    assert.equal(config["max_batch_size"], 8);
    // As Triton: every field, defaults included (max_batch_size 0 is there to be read, not left out).
    const unbatched = (await (await fetch(url("/v2/models/identity_all/config"))).json()) as Record<string, unknown>;
    assert.equal(unbatched["max_batch_size"], 0);
    assert.equal(unbatched["platform"], "");
    const input = (unbatched["input"] as Record<string, unknown>[])[0]!;
    assert.deepEqual(
      [input["is_shape_tensor"], input["allow_ragged_batch"], input["format"]],
      [false, false, "FORMAT_NONE"],
    );
  });

  it("infers with JSON data (nested arrays, 64-bit integers exact) and with binary data, BYTES included", async () => {
    // Written as text: a JavaScript number could not hold these values.
    const nested = await post(
      "/v2/models/identity_all/infer",
      '{"id":"nested","inputs":[{"name":"IN_INT64","shape":[3],"datatype":"INT64","data":[[9007199254740993],[-9223372036854775808],[7]]}]}',
    );
    assert.equal(nested.status, 200, await nested.clone().text());
    assert.equal(nested.headers.get("content-type"), "application/json");
    const text = await nested.text();
    assert.match(text, /"data":\[9007199254740993,-9223372036854775808,7\]/);
    assert.match(text, /"id":"nested"/);

    const words = [Buffer.from("héllo"), Buffer.alloc(0), Buffer.from("world")];
    const framed = Buffer.concat(words.flatMap((word) => [Buffer.from(Uint32Array.of(word.length).buffer), word]));
    const { body, headers } = binaryBody(
      {
        inputs: [{ name: "IN_BYTES", shape: [3], datatype: "BYTES", parameters: { binary_data_size: framed.length } }],
        parameters: { binary_data_output: true },
      },
      framed,
    );
    const reply = await fetch(url("/v2/models/identity_all/infer"), { method: "POST", body, headers });
    assert.equal(reply.status, 200);
    const replyBody = Buffer.from(await reply.arrayBuffer());
    const headerLength = Number(reply.headers.get("inference-header-content-length"));
    const header = JSON.parse(replyBody.subarray(0, headerLength).toString()) as {
      outputs: { name: string; parameters: { binary_data_size: number } }[];
    };
    assert.equal(header.outputs[0]!.parameters.binary_data_size, framed.length);
    assert.deepEqual(replyBody.subarray(headerLength), framed);
  });

  it("takes gzip and deflate bodies and compresses replies a client accepts", async () => {
    const reply = await fetch(url("/v2/models/identity_fp32/infer"), {
      method: "POST",
      body: gzipSync(jsonInfer(512)),
      headers: { "content-type": "application/json", "content-encoding": "gzip", "accept-encoding": "gzip" },
    });
    assert.equal(reply.status, 200);
    assert.equal(reply.headers.get("content-encoding"), "gzip");
    const decoded = (await reply.json()) as { outputs: { data: number[] }[] };
    assert.equal(decoded.outputs[0]!.data.length, 512);
  });

  describe("bad input: the right status, a message naming the field, every other request unaffected", () => {
    const twelveBytes = Buffer.alloc(12);
    const cases: { what: string; send: () => Promise<Response>; status: number; message: RegExp }[] = [
      {
        what: "malformed JSON",
        send: () => post("/v2/models/identity_fp32/infer", '{"inputs": ['),
        status: 400,
        message: /not valid JSON/,
      },
      {
        what: "a content type that is not JSON",
        send: () => post("/v2/models/identity_fp32/infer", jsonInfer(), { "content-type": "image/png" }),
        status: 415,
        message: /Content-Type 'image\/png' is not accepted/,
      },
      {
        what: "an encoding that is not gzip or deflate",
        send: () => post("/v2/models/identity_fp32/infer", jsonInfer(), { "content-encoding": "compress" }),
        status: 415,
        message: /compress/,
      },
      {
        what: "a header length longer than the body",
        send: () => post("/v2/models/identity_fp32/infer", jsonInfer(), { "inference-header-content-length": "9999" }),
        status: 400,
        message: /Inference-Header-Content-Length.*9999/,
      },
      {
        what: "a binary size past the end of the body",
        send: () => {
          const header = {
            inputs: [{ name: "INPUT0", shape: [1, 4], datatype: "FP32", parameters: { binary_data_size: 16 } }],
          };
          const { body, headers } = binaryBody(header, twelveBytes);
          return fetch(url("/v2/models/identity_fp32/infer"), { method: "POST", body, headers });
        },
        status: 400,
        message: /binary_data_size 16 runs past the end/,
      },
      {
        what: "binary bytes no input accounts for",
        send: () => {
          const header = {
            inputs: [{ name: "INPUT0", shape: [1, 2], datatype: "FP32", parameters: { binary_data_size: 8 } }],
          };
          const { body, headers } = binaryBody(header, twelveBytes);
          return fetch(url("/v2/models/identity_fp32/infer"), { method: "POST", body, headers });
        },
        status: 400,
        message: /4 bytes of binary data that no input's binary_data_size accounts for/,
      },
      {
        what: "a binary size that does not fit the shape",
        send: () => {
          const header = {
            inputs: [{ name: "INPUT0", shape: [1, 4], datatype: "FP32", parameters: { binary_data_size: 12 } }],
          };
          const { body, headers } = binaryBody(header, twelveBytes);
          return fetch(url("/v2/models/identity_fp32/infer"), { method: "POST", body, headers });
        },
        status: 400,
        message: /'INPUT0'.*binary_data_size is 12 bytes, but shape \[1,4\] of FP32 needs 16/,
      },
      {
        what: "raw BYTES without length prefixes (as the reference frontend's example sends)",
        send: () => {
          const text = Buffer.from("Hello world");
          const header = {
            inputs: [
              { name: "IN_BYTES", shape: [1], datatype: "BYTES", parameters: { binary_data_size: text.length } },
            ],
          };
          const { body, headers } = binaryBody(header, text);
          return fetch(url("/v2/models/identity_all/infer"), { method: "POST", body, headers });
        },
        status: 400,
        message: /element 0 declares 1819043144 bytes but only 7 remain.*4-byte little-endian length prefix/,
      },
      {
        what: "an unknown field",
        send: () => post("/v2/models/identity_fp32/infer", jsonInfer(4, { priority: 1 })),
        status: 400,
        message: /unknown field 'priority'/,
      },
      {
        what: "a misspelt input field",
        send: () =>
          post(
            "/v2/models/identity_fp32/infer",
            JSON.stringify({ inputs: [{ name: "INPUT0", shape: [1, 1], datatype: "FP32", dat: [1] }] }),
          ),
        status: 400,
        message: /unknown field 'inputs\[0\]\.dat'/,
      },
      {
        what: "no inputs",
        send: () => post("/v2/models/identity_fp32/infer", "{}"),
        status: 400,
        message: /'inputs' must be an array/,
      },
      {
        what: "a missing required input",
        send: () => post("/v2/models/identity_fp32/infer", JSON.stringify({ inputs: [] })),
        status: 400,
        message: /missing required input 'INPUT0'/,
      },
      {
        what: "FP16 in JSON",
        send: () =>
          post(
            "/v2/models/identity_all/infer",
            JSON.stringify({ inputs: [{ name: "IN_FP16", shape: [1], datatype: "FP16", data: [1] }] }),
          ),
        status: 400,
        message: /FP16 has no JSON form; send it as binary data/,
      },
      {
        what: "an element of the wrong type",
        send: () =>
          post(
            "/v2/models/identity_all/infer",
            JSON.stringify({ inputs: [{ name: "IN_INT8", shape: [2], datatype: "INT8", data: [1, "two"] }] }),
          ),
        status: 400,
        message: /'IN_INT8'.*element 1/,
      },
      {
        what: "a body over the max message size",
        send: () => post("/v2/models/identity_fp32/infer", jsonInfer(20_000)),
        status: 413,
        message: /body/i,
      },
      {
        what: "a small gzip body that inflates past the max message size",
        send: () =>
          post("/v2/models/identity_fp32/infer", gzipSync(Buffer.alloc(4 * MAX_BODY, 0x20)), {
            "content-encoding": "gzip",
          }),
        status: 413,
        message: /body/i,
      },
      {
        what: "an unknown model",
        send: () => post("/v2/models/no_such_model/infer", jsonInfer()),
        status: 404,
        message: /no_such_model/,
      },
      {
        what: "an unknown model whose name is longer than the router's default parameter length (100)",
        send: () => post(`/v2/models/${"m".repeat(300)}/infer`, jsonInfer()),
        status: 404,
        message: /m{300}/,
      },
      {
        what: "an unknown version",
        send: () => post("/v2/models/identity_fp32/versions/9/infer", jsonInfer()),
        status: 404,
        message: /version/,
      },
      {
        what: "an unknown route",
        send: () => fetch(url("/v2/nothing/here")),
        status: 404,
        message: /no route for GET \/v2\/nothing\/here/,
      },
    ];

    for (const { what, send, status, message } of cases) {
      it(`${what}: ${status}`, async () => {
        let good = 0;
        const others = Promise.all(
          Array.from({ length: 4 }, async () => {
            const reply = await post("/v2/models/identity_fp32/infer", jsonInfer());
            if (reply.status === 200) good++;
            await reply.arrayBuffer();
          }),
        );
        const reply = await send();
        assert.equal(reply.status, status, await reply.clone().text());
        assert.equal(reply.headers.get("content-type"), "application/json");
        const body = (await reply.json()) as { error: string };
        assert.match(body.error, message);
        await others;
        assert.equal(good, 4, "every other request succeeded");
      });
    }
  });

  // Mocha runs a suite's own tests before its nested suites': this one comes after them.
  describe("after the requests above", () => {
    it("writes no log line per request (the route metrics count them)", () => {
      const perRequest = serving.server.logs.filter(
        (line) => line["msg"] === "incoming request" || line["msg"] === "request completed",
      );
      assert.deepEqual(perRequest, []);
    });
    it("counts HTTP requests by route template and status, and inference by endpoint", async () => {
      const samples = await scrape(`http://127.0.0.1:${serving.server.metricsPort}/metrics`);
      const infer = { method: "POST", route: "/v2/models/:model/infer" };
      assert.ok(valueOf(samples, "http_server_requests_total", { ...infer, status: "200" }) >= 20);
      assert.ok(valueOf(samples, "http_server_requests_total", { ...infer, status: "400" }) >= 10);
      assert.ok(valueOf(samples, "http_server_requests_total", { ...infer, status: "413" }) >= 2);
      assert.equal(
        valueOf(samples, "http_server_requests_total", { method: "GET", route: "unmatched", status: "404" }),
        1,
      );
      assert.ok(
        valueOf(samples, "dynamo_frontend_requests_total", {
          model: "identity_fp32",
          endpoint: "infer",
          request_type: "unary",
          status: "success",
        }) >= 20,
      );
    });
  });
});
