import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { request as httpRequest } from "node:http";
import { createGzip, gzipSync } from "node:zlib";
import { IDENTITY_ALL_TYPES } from "../fixtures/repository.js";
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

/** The server's peak resident memory (VmHWM), in bytes. */
async function peakMemory(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  const kilobytes = /VmHWM:\s+(\d+) kB/.exec(status)?.[1];
  assert.ok(kilobytes !== undefined, status);
  return Number(kilobytes) * 1024;
}

/** GETs /v2/health/live on a fresh connection (never one the big request holds) every `gapMs`; the slowest answer. */
function probeLiveness(port: number, gapMs = 20): { stop(): Promise<number> } {
  let running = true;
  let slowest = 0;
  const once = (): Promise<void> =>
    new Promise((resolve, reject) => {
      const started = performance.now();
      const req = httpRequest({ host: "127.0.0.1", port, path: "/v2/health/live", agent: false }, (reply) => {
        reply.resume();
        reply.on("end", () => {
          slowest = Math.max(slowest, performance.now() - started);
          resolve();
        });
      });
      req.on("error", reject);
      req.end();
    });
  const loop = (async () => {
    while (running) {
      await once();
      await new Promise((resolve) => setTimeout(resolve, gapMs));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return Math.round(slowest);
    },
  };
}

describe("hostile HTTP bodies: compression bombs, the largest JSON request, deep nesting", function () {
  this.timeout(120_000);
  const serving = useServer({ identity_all: IDENTITY_ALL_TYPES }, ["--max-message-size", String(LIMIT)]);
  const url = (path: string): string => `http://127.0.0.1:${serving.server.httpPort}${path}`;
  const post = (path: string, body: string | Buffer, headers: Record<string, string> = {}): Promise<Response> =>
    fetch(url(path), { method: "POST", body, headers: { "content-type": "application/json", ...headers } });

  it("answers a gzip bomb 413 naming the limit, inflating no more than about the limit", async () => {
    // 512 MiB of zeros in about 0.5 MB: 32 times the limit.
    const bomb = await gzipOfZeros(32 * LIMIT);
    const before = await peakMemory(serving.server.process.pid!);
    const reply = await post("/v2/models/identity_all/infer", bomb, { "content-encoding": "gzip" });
    assert.equal(reply.status, 413);
    const { error } = (await reply.json()) as { error: string };
    assert.match(error, new RegExp(`${LIMIT} bytes`));
    const grown = (await peakMemory(serving.server.process.pid!)) - before;
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
    const baselineProbe = probeLiveness(serving.server.httpPort);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const baseline = await baselineProbe.stop();
    const probe = probeLiveness(serving.server.httpPort);
    const reply = await post("/v2/models/identity_all/infer", gzipped, { "content-encoding": "gzip" });
    const slowest = await probe.stop();
    assert.equal(reply.status, 200, await reply.clone().text());
    const replyBody = Buffer.from(await reply.arrayBuffer());
    const headerLength = Number(reply.headers.get("inference-header-content-length"));
    const out = replyBody.subarray(headerLength);
    assert.equal(out.length, count * 8);
    assert.equal(out.readBigInt64LE(0), BigInt(big));
    assert.equal(out.readBigInt64LE(8), 0n);
    // Generous: the defect was a multi-second stall (the baseline is a few milliseconds).
    assert.ok(slowest < 2500, `liveness took up to ${slowest} ms while decoding (baseline ${baseline} ms)`);
  });

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
