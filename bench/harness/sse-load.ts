import { Agent, request } from "undici";
import { StreamTally } from "./stream-tally.js";

/**
 * The OpenAI streaming load generator: `streams` concurrent POST /v1/chat/completions with
 * `stream: true`, each reading its `tokens` SSE chunks to `[DONE]` and then asking again.
 * Prints one JSON line: responses (token chunks), errors, and the p50/p99 gap between a
 * stream's consecutive chunks — the same measures stream-load.ts takes over gRPC.
 *
 * Usage: node sse-load.js <host:port> <model> <streams> <tokens> <warmup s> <duration s>
 */

const [address = "", model = "", streamArg = "1", tokenArg = "16", warmupArg = "1", durationArg = "5"] =
  process.argv.slice(2);
const [streams, tokens, warmupSeconds, durationSeconds] = [streamArg, tokenArg, warmupArg, durationArg].map(Number) as [
  number,
  number,
  number,
  number,
];

const body = JSON.stringify({
  model,
  messages: [{ role: "user", content: "hello" }],
  max_tokens: tokens,
  stream: true,
});
// One connection per stream: HTTP/1.1 carries one SSE stream at a time.
const dispatcher = new Agent({ connections: streams, pipelining: 1, headersTimeout: 0, bodyTimeout: 0 });
const tally = new StreamTally();
let running = true;

async function stream(): Promise<void> {
  while (running) {
    try {
      const reply = await request(`http://${address}/v1/chat/completions`, {
        method: "POST",
        body,
        headers: { "content-type": "application/json" },
        dispatcher,
      });
      if (reply.statusCode !== 200) {
        tally.error();
        await reply.body.dump();
        continue;
      }
      let last = 0;
      let received = 0;
      let pending = "";
      for await (const chunk of reply.body) {
        pending += (chunk as Buffer).toString();
        const events = pending.split("\n\n");
        pending = events.pop() ?? "";
        for (const event of events) {
          if (!event.startsWith("data: {")) continue;
          const now = performance.now();
          tally.response(received > 0 ? now - last : undefined);
          last = now;
          received++;
        }
      }
    } catch {
      tally.error();
    }
  }
}

for (let i = 0; i < streams; i++) void stream();

tally.measure(warmupSeconds, durationSeconds, () => (running = false));
