import assert from "node:assert/strict";
import { createGzip, gzipSync } from "node:zlib";
import { livenessDuring, peakBytes, stalled } from "../fixtures/process-watch.js";
import { IDENTITY_ALL_TYPES, mockerConfig } from "../fixtures/repository.js";
import { useServer } from "../fixtures/serving.js";

/**
 * Bodies built to make the front door work: a compressed body that inflates far past the
 * body limit (refused as it inflates, memory bounded), the largest legitimate JSON request
 * (decoded without stopping the server from answering others), JSON nested deeper than any
 * tensor. Timings here are liveness checks with generous bounds, not performance figures.
 */

const LIMIT = 16 * 1024 * 1024;

/** A gzip body of `size` zero bytes, made in chunks (the test never holds the inflated bytes). */
async function gzipOfZeros(size: number): Promise<Buffer> {
  const gzip = createGzip({ level: 9 });
  const parts: Buffer[] = [];
  gzip.on("data", (part: Buffer) => parts.push(part));
  const done = new Promise((resolve) => gzip.on("end", resolve));
  const chunk = Buffer.alloc(1024 * 1024);
  for (let written = 0; written < size; written += chunk.length) {
    if (!gzip.write(chunk)) await new Promise((resolve) => gzip.once("drain", resolve));
  }
  gzip.end();
  await done;
  return Buffer.concat(parts);
}

describe("hostile HTTP bodies: compression bombs, the largest JSON request, deep nesting", function () {
  this.timeout(120_000);
  const serving = useServer({ identity_all: IDENTITY_ALL_TYPES, llm: mockerConfig("llm", { decoupled: true }) }, [
    "--max-message-size",
    String(LIMIT),
  ]);
  const url = (path: string): string => `http://127.0.0.1:${serving.server.httpPort}${path}`;
  const post = (path: string, body: string | Buffer, headers: Record<string, string> = {}): Promise<Response> =>
    fetch(url(path), { method: "POST", body, headers: { "content-type": "application/json", ...headers } });

  it("answers a gzip bomb 413 naming the limit, inflating no more than about the limit", async () => {
    // 512 MiB of zeros in about 0.5 MB: 32 times the limit.
    const bomb = await gzipOfZeros(32 * LIMIT);
    const before = await peakBytes(serving.server.process.pid!);
    const reply = await post("/v2/models/identity_all/infer", bomb, { "content-encoding": "gzip" });
    assert.equal(reply.status, 413);
    const { error } = (await reply.json()) as { error: string };
    assert.match(error, new RegExp(`${LIMIT} bytes`));
    const grown = (await peakBytes(serving.server.process.pid!)) - before;
    assert.ok(grown < 8 * LIMIT, `peak memory grew by ${grown} bytes for a ${LIMIT}-byte limit`);
  });

  it("keeps answering /v2/health/live while it decodes the largest JSON infer request (INT64, exact)", async () => {
    // Small numbers fill the body; one beyond 2^53 makes exactness matter.
    const big = "9223372036854775807";
    const count = Math.floor((LIMIT - 1024) / 2) - 1;
    const data = `[${big}${",0".repeat(count - 1)}]`;
    const body = `{"inputs":[{"name":"IN_INT64","shape":[${count}],"datatype":"INT64","data":${data}}],"parameters":{"binary_data_output":true}}`;
    assert.ok(body.length <= LIMIT);
    const gzipped = gzipSync(body);
    const watched = await livenessDuring(serving.server.httpPort, () =>
      post("/v2/models/identity_all/infer", gzipped, { "content-encoding": "gzip" }),
    );
    const reply = watched.result;
    assert.equal(reply.status, 200, await reply.clone().text());
    const replyBody = Buffer.from(await reply.arrayBuffer());
    const headerLength = Number(reply.headers.get("inference-header-content-length"));
    const out = replyBody.subarray(headerLength);
    assert.equal(out.length, count * 8);
    assert.equal(out.readBigInt64LE(0), BigInt(big));
    assert.equal(out.readBigInt64LE(8), 0n);
    // The defect held the loop for the whole decode (5.3 s; 0.2 s on a thread).
    assert.ok(!stalled(watched), `liveness took up to ${watched.slowestMs} ms of the request's ${watched.tookMs} ms`);
  });

  for (const path of ["/v2/models/llm/generate", "/v1/chat/completions"]) {
    it(`keeps answering /v2/health/live while it reads a compressed JSON body at the limit on ${path}`, async () => {
      // A valid request padded with an unknown field of empty arrays (the most work per
      // byte to parse and to copy between threads): about 16 KB that inflates to the limit.
      const head = path.startsWith("/v1")
        ? '{"model":"llm","messages":[{"role":"user","content":"x"}]'
        : '{"text_input":"x"';
      const padding = Math.floor((LIMIT - head.length - 16) / 3);
      const body = gzipSync(`${head},"junk":[[]${",[]".repeat(padding - 1)}]}`, { level: 9 });
      const watched = await livenessDuring(serving.server.httpPort, () =>
        post(path, body, { "content-encoding": "gzip" }),
      );
      const reply = watched.result;
      assert.equal(reply.status, 400);
      assert.match(await reply.text(), /more than 100000 JSON values|unknown field 'junk'/);
      assert.ok(!stalled(watched), `liveness took up to ${watched.slowestMs} ms of the request's ${watched.tookMs} ms`);
    });
  }

  it("answers a large body's mistakes as a small one's (decoded on another thread): status and message", async () => {
    const data = `[1${",1".repeat(1024 * 1024)}]`;
    const reply = await post(
      "/v2/models/identity_all/infer",
      `{"inputs":[{"name":"IN_INT8","shape":[3],"datatype":"INT8","data":${data}}]}`,
    );
    assert.equal(reply.status, 400);
    const { error } = (await reply.json()) as { error: string };
    assert.match(error, /inputs\[0\] 'IN_INT8': shape \[3\] needs 3 elements, 'data' holds 1048577/);
    const exact = await post(
      "/v2/models/identity_all/infer",
      `{"inputs":[{"name":"IN_UINT64","shape":[1048577],"datatype":"UINT64","data":[18446744073709551615${",1".repeat(1024 * 1024)}]}]}`,
    );
    assert.equal(exact.status, 200);
    assert.match((await exact.text()).slice(0, 400), /"data":\[18446744073709551615,1,1,/);
  });

  it("answers JSON nested 100,000 levels deep 400, naming the nesting", async () => {
    const deep = `${"[".repeat(100_000)}1${"]".repeat(100_000)}`;
    for (const datatype of ["INT64", "FP32"]) {
      const reply = await post(
        "/v2/models/identity_all/infer",
        `{"inputs":[{"name":"IN_${datatype}","shape":[1],"datatype":"${datatype}","data":${deep}}]}`,
      );
      assert.equal(reply.status, 400, await reply.clone().text());
      const { error } = (await reply.json()) as { error: string };
      assert.match(error, /nest/);
    }
  });
});
