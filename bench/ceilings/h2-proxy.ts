import {
  connect,
  constants,
  createServer,
  type ClientHttp2Session,
  type IncomingHttpHeaders,
  type ServerHttp2Stream,
} from "node:http2";
import { DEFAULT_CONNECTION_WINDOW, DEFAULT_STREAM_WINDOW } from "../../lib/contract/dataplane.js";
import { countExternalMemoryInHeapLimit } from "../../lib/external-memory.js";

/**
 * A bare `node:http2` stream proxy: the least a forwarder on Node can do per gRPC call, the
 * ceiling the data plane's forwarding is measured against. Each client stream becomes one
 * stream on a pooled upstream session with the same headers (`:authority` the upstream's);
 * request DATA goes up, response headers, DATA and trailers come back as they came, and a
 * reset on either side resets the other with the same code. It reads no message and knows
 * nothing of gRPC. Windows as the data plane's (8 MiB per stream, 16 MiB per connection).
 *
 * Usage: node dist/bench/ceilings/h2-proxy.js <port> <upstream host:port>
 * Prints "listening <port>".
 */

countExternalMemoryInHeapLimit();
const [portArgument = "0", upstream = "127.0.0.1:8001"] = process.argv.slice(2);
const { NGHTTP2_NO_ERROR, NGHTTP2_FLAG_END_STREAM } = constants;
const settings = { initialWindowSize: DEFAULT_STREAM_WINDOW };
// node:http2 refuses streams past 10 MB of buffered session data by default; grpc-js lifts it too.
const maxSessionMemory = Number.MAX_SAFE_INTEGER;

let pooled: ClientHttp2Session | undefined;
/** The one upstream session, opened again once it is closed or lost. */
function session(): ClientHttp2Session {
  if (pooled !== undefined && !pooled.closed && !pooled.destroyed) return pooled;
  const opened = connect(`http://${upstream}`, { settings, maxSessionMemory });
  opened.on("connect", () => opened.setLocalWindowSize(DEFAULT_STREAM_WINDOW));
  opened.on("error", () => undefined); // its streams fail with it; the next call reconnects
  // A closed session, or one going away, takes no new streams: the next call opens another.
  const forget = () => pooled === opened && (pooled = undefined);
  opened.on("goaway", forget);
  opened.on("close", forget);
  return (pooled = opened);
}

function relay(client: ServerHttp2Stream, headers: IncomingHttpHeaders): void {
  const up = session().request({ ...headers, ":authority": upstream }, { endStream: false });
  let trailers: IncomingHttpHeaders = {};
  client.pipe(up);
  up.on("response", (responseHeaders, flags) => {
    if (client.closed) return;
    // A Trailers-Only response (a status without a message) ends in its headers.
    if ((flags & NGHTTP2_FLAG_END_STREAM) !== 0) return client.respond(responseHeaders, { endStream: true });
    client.respond(responseHeaders, { waitForTrailers: true });
    up.pipe(client);
  });
  up.on("trailers", (received) => (trailers = received));
  client.on("wantTrailers", () => client.sendTrailers(trailers));
  // A reset (or a failure) on one side resets the other, with the same code.
  client.on("close", () => client.rstCode !== NGHTTP2_NO_ERROR && !up.closed && up.close(client.rstCode));
  up.on("close", () => up.rstCode !== NGHTTP2_NO_ERROR && !client.closed && client.close(up.rstCode));
  client.on("error", () => undefined);
  up.on("error", () => undefined);
}

const server = createServer({ settings, maxSessionMemory });
server.on("session", (accepted) => accepted.setLocalWindowSize(DEFAULT_CONNECTION_WINDOW));
server.on("stream", relay);
server.listen(Number(portArgument), "127.0.0.1", () => {
  const address = server.address();
  console.log(`listening ${typeof address === "object" && address !== null ? address.port : portArgument}`);
});
