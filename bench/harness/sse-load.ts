import { Agent, request } from "undici";

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
let measuring = false;
let running = true;
let responses = 0;
let errors = 0;
const gaps: number[] = [];

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
        if (measuring) errors++;
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
          if (measuring) {
            responses++;
            if (received > 0) gaps.push(now - last);
          }
          last = now;
          received++;
        }
      }
    } catch {
      if (measuring) errors++;
    }
  }
}

for (let i = 0; i < streams; i++) void stream();

setTimeout(() => {
  measuring = true;
  setTimeout(() => {
    measuring = false;
    running = false;
    gaps.sort((a, b) => a - b);
    const at = (share: number) => gaps[Math.min(gaps.length - 1, Math.floor(share * gaps.length))] ?? NaN;
    console.log(JSON.stringify({ responses, errors, p50Ms: at(0.5), p99Ms: at(0.99) }));
    process.exit(0);
  }, durationSeconds * 1000);
}, warmupSeconds * 1000);
