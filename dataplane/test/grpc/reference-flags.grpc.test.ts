import { credentials, Metadata, status, type ChannelCredentials, type ServiceError } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import { connect as http2Connect, constants, type ClientHttp2Session, type ClientHttp2Stream } from "node:http2";
import { connect as tcpConnect } from "node:net";
import { GRPCInferenceServiceClient } from "../../../proto/gen/ts/grpc_service.js";
import { createTestCa } from "../../../e2e/support/certificates.js";
import { freePort } from "../../../e2e/support/ports.js";
import { SecretFiles } from "../fixtures/secret-files.js";
import { dataPlaneFailing, startServer, type ServerProcess } from "../fixtures/server.js";

/** ServerLive over a new channel to 127.0.0.1:`port`; resolves with the error, if any. */
async function serverLive(port: number, channelCredentials: ChannelCredentials): Promise<ServiceError | null> {
  const client = new GRPCInferenceServiceClient(`localhost:${port}`, channelCredentials);
  try {
    return await new Promise((resolve) =>
      client.serverLive({}, new Metadata(), { deadline: Date.now() + 5000 }, (error) => resolve(error)),
    );
  } finally {
    client.close();
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Goaway {
  readonly code: number;
  readonly debug: string;
}

/**
 * A bare HTTP/2 connection (no call ever opened) that sends a PING every `gapMs`, `count`
 * times; resolves with the GOAWAY it got, if any, once the pings are done or the server hung up.
 */
async function pingIdle(port: number, count: number, gapMs: number): Promise<Goaway | undefined> {
  const session: ClientHttp2Session = http2Connect(`http://127.0.0.1:${port}`);
  let goaway: Goaway | undefined;
  session.on("goaway", (code, _lastStreamId, debug) => (goaway = { code, debug: debug?.toString() ?? "" }));
  session.on("error", () => undefined);
  await new Promise<void>((resolve, reject) => {
    session.once("connect", () => resolve());
    session.once("error", reject);
  });
  try {
    for (let sent = 0; sent < count && goaway === undefined && !session.closed; sent++) {
      session.ping(() => undefined);
      await sleep(gapMs);
    }
    await sleep(200);
    return goaway;
  } finally {
    session.destroy();
  }
}

/** A gRPC call of the inference service opened on a bare HTTP/2 session. */
function rawCall(session: ClientHttp2Session, method: string): ClientHttp2Stream {
  const call = session.request({
    ":method": "POST",
    ":path": `/inference.GRPCInferenceService/${method}`,
    "content-type": "application/grpc",
    te: "trailers",
  });
  call.on("error", () => undefined);
  return call;
}

/** An empty SETTINGS frame: length 0, type 4, no flags, stream 0. */
const EMPTY_SETTINGS = Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]);

/**
 * A peer that sends the HTTP/2 preface and then never answers anything (no SETTINGS or PING
 * ACK); resolves with how long the server kept the connection, or Infinity after `waitMs`.
 */
function mutePeer(port: number, waitMs: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const socket = tcpConnect(port, "127.0.0.1", () =>
      socket.write(Buffer.concat([Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), EMPTY_SETTINGS])),
    );
    const timer = setTimeout(() => {
      socket.removeAllListeners("close");
      socket.destroy();
      resolve(Number.POSITIVE_INFINITY);
    }, waitMs);
    socket.on("data", () => undefined);
    socket.on("error", reject);
    socket.on("close", () => {
      clearTimeout(timer);
      resolve(performance.now() - started);
    });
  });
}

describe("the reference frontend's command lines, variables and connection knobs", function () {
  this.timeout(60_000);

  it("starts from `--grpc-port <port> --kserve-mode` as the reference's InferenceService runs it, and serves KServe v2", async () => {
    // The reference runs it on 8001; a free port, so that a data plane already serving here does not collide.
    const port = await freePort();
    const server = await startServer(["--grpc-port", String(port), "--kserve-mode"]);
    try {
      assert.equal(server.grpcPort, port);
      assert.equal(await serverLive(port, credentials.createInsecure()), null);
    } finally {
      await server.stop();
    }
  });

  it("turns TLS on from DYNAMO_TLS_CERT and DYNAMO_TLS_KEY alone", async () => {
    const ca = await createTestCa("reference CA");
    const files = new SecretFiles();
    files.writeIdentity(await ca.issue("data plane", { dns: ["localhost"], ips: ["127.0.0.1"] }));
    const server = await startServer([], {
      DYNAMO_TLS_CERT: files.path("tls.crt"),
      DYNAMO_TLS_KEY: files.path("tls.key"),
    });
    try {
      assert.equal(await serverLive(server.grpcPort, credentials.createSsl(Buffer.from(ca.certificate))), null);
      const plaintext = await serverLive(server.grpcPort, credentials.createInsecure());
      assert.equal(plaintext?.code, status.UNAVAILABLE);
    } finally {
      await server.stop();
      files.remove();
    }
  });

  describe("client pings, as a gRPC core server polices them", () => {
    let strict: ServerProcess;
    let permissive: ServerProcess;
    let lenient: ServerProcess;
    before(async () => {
      [strict, permissive, lenient] = await Promise.all([
        // Triton's defaults but for the interval: idle pings not permitted, two strikes.
        startServer(["--grpc-http2-max-ping-strikes", "2", "--grpc-http2-min-ping-interval-without-data-secs", "0.2"]),
        startServer([
          "--grpc-http2-max-ping-strikes",
          "2",
          "--grpc-http2-min-ping-interval-without-data-secs",
          "0.2",
          "--grpc-keepalive-permit-without-calls",
        ]),
        startServer([]),
      ]);
    });
    after(async () => {
      await Promise.all([strict?.stop(), permissive?.stop(), lenient?.stop()]);
    });

    it("sends GOAWAY too_many_pings (ENHANCE_YOUR_CALM) after the strikes: pings with no call open, not permitted", async () => {
      const goaway = await pingIdle(strict.grpcPort, 6, 300);
      assert.deepEqual(goaway, { code: constants.NGHTTP2_ENHANCE_YOUR_CALM, debug: "too_many_pings" });
    });

    it("with --grpc-keepalive-permit-without-calls, idle pings at the interval are fine and faster ones strike out", async () => {
      assert.equal(await pingIdle(permissive.grpcPort, 6, 300), undefined);
      const goaway = await pingIdle(permissive.grpcPort, 6, 20);
      assert.equal(goaway?.debug, "too_many_pings");
    });

    it("counts no ping while a call is open", async () => {
      const session = http2Connect(`http://127.0.0.1:${strict.grpcPort}`);
      let goaway = false;
      session.on("goaway", () => (goaway = true));
      session.on("error", () => undefined);
      try {
        // A ModelStreamInfer call left open: its pings keep it alive, as a streaming client's would.
        const call = rawCall(session, "ModelStreamInfer");
        // The server answers a stream's headers with its first reply; give it the call first.
        await sleep(200);
        for (let sent = 0; sent < 6; sent++) {
          session.ping(() => undefined);
          await sleep(20);
        }
        await sleep(200);
        assert.equal(goaway, false);
        call.close();
      } finally {
        session.destroy();
      }
    });

    it("accepts every ping without --grpc-http2-max-ping-strikes, as grpc-js does", async () => {
      assert.equal(await pingIdle(lenient.grpcPort, 6, 20), undefined);
    });
  });

  describe("the server's keepalive pings, shaped as a gRPC core server shapes them", () => {
    /** Keepalive pings an idle HTTP/2 client (answering each) receives from a server in `ms`. */
    async function pingsReceived(port: number, ms: number): Promise<number> {
      const session = http2Connect(`http://127.0.0.1:${port}`);
      session.on("error", () => undefined);
      let received = 0;
      session.on("ping", () => received++);
      await sleep(ms);
      session.destroy();
      return received;
    }
    let every: ServerProcess;
    let limited: ServerProcess;
    let spaced: ServerProcess;
    before(async () => {
      const keepalive = ["--grpc-keepalive-time-secs", "0.1"];
      [every, limited, spaced] = await Promise.all([
        startServer(keepalive),
        startServer([...keepalive, "--grpc-http2-max-pings-without-data", "2"]),
        startServer([...keepalive, "--grpc-http2-min-time-between-pings-secs", "0.5"]),
      ]);
    });
    after(async () => {
      await Promise.all([every?.stop(), limited?.stop(), spaced?.stop()]);
    });

    it("pings every --grpc-keepalive-time-secs", async () => {
      const count = await pingsReceived(every.grpcPort, 1_200);
      assert.ok(count >= 6, `${count} pings in 1.2 s`);
    });

    it("stops after --grpc-http2-max-pings-without-data until a call goes by, then pings again", async () => {
      const session = http2Connect(`http://127.0.0.1:${limited.grpcPort}`);
      session.on("error", () => undefined);
      let received = 0;
      session.on("ping", () => received++);
      try {
        await sleep(1_000);
        assert.equal(received, 2, "two pings, then none without data");
        const call = rawCall(session, "ServerLive");
        call.end(Buffer.from([0, 0, 0, 0, 0]));
        call.resume();
        await new Promise((resolve) => call.once("close", resolve));
        await sleep(1_000);
        assert.ok(received >= 3 && received <= 6, `${received} pings after a call`);
      } finally {
        session.destroy();
      }
    });

    it("keeps --grpc-http2-min-time-between-pings-secs between them", async () => {
      const count = await pingsReceived(spaced.grpcPort, 1_200);
      assert.ok(count >= 1 && count <= 3, `${count} pings in 1.2 s`);
    });

    it("refuses the shaping knobs without a keepalive time to shape", async () => {
      const refused = await dataPlaneFailing(["--grpc-http2-max-pings-without-data", "2"]);
      assert.match(refused.stderr, /shape the server's keepalive pings: set --grpc-keepalive-time-secs/);
    });
  });

  describe("the server's HTTP/2 receive windows (grpc-js patched: patches/@grpc+grpc-js+1.14.7.patch)", () => {
    /** The windows a client is granted: per call (SETTINGS) and for the connection. */
    async function windowsGranted(port: number): Promise<{ stream: number; connection: number }> {
      const session = http2Connect(`http://127.0.0.1:${port}`);
      session.on("error", () => undefined);
      try {
        await new Promise((resolve) => session.once("remoteSettings", resolve));
        // The connection window comes as a WINDOW_UPDATE right after the server's SETTINGS.
        await sleep(100);
        return { stream: session.remoteSettings.initialWindowSize!, connection: session.state.remoteWindowSize! };
      } finally {
        session.destroy();
      }
    }

    it("grants 8 MiB per call and 16 MiB per connection by default, not Node's 64 KiB", async () => {
      const server = await startServer([]);
      try {
        assert.deepEqual(await windowsGranted(server.grpcPort), { stream: 8 * 2 ** 20, connection: 16 * 2 ** 20 });
      } finally {
        await server.stop();
      }
    });

    it("takes them from the reference's DYN_GRPC_INITIAL_STREAM_WINDOW_SIZE and DYN_GRPC_INITIAL_CONNECTION_WINDOW_SIZE", async () => {
      const server = await startServer([], {
        DYN_GRPC_INITIAL_STREAM_WINDOW_SIZE: String(2 ** 20),
        DYN_GRPC_INITIAL_CONNECTION_WINDOW_SIZE: String(3 * 2 ** 20),
      });
      try {
        assert.deepEqual(await windowsGranted(server.grpcPort), { stream: 2 ** 20, connection: 3 * 2 ** 20 });
      } finally {
        await server.stop();
      }
    });
  });

  describe("server-side connection limits", () => {
    it("closes an idle connection after --grpc-max-connection-idle-secs with GOAWAY", async () => {
      const server = await startServer(["--grpc-max-connection-idle-secs", "0.5"]);
      try {
        const session = http2Connect(`http://127.0.0.1:${server.grpcPort}`);
        session.on("error", () => undefined);
        const started = performance.now();
        const code = await new Promise<number>((resolve) => session.once("goaway", (errorCode) => resolve(errorCode)));
        const after = performance.now() - started;
        session.destroy();
        assert.equal(code, constants.NGHTTP2_NO_ERROR);
        assert.ok(after >= 400 && after < 5_000, `GOAWAY after ${after.toFixed(0)} ms`);
      } finally {
        await server.stop();
      }
    });

    it("drops a connection whose keepalive ping goes unanswered for --grpc-keepalive-timeout-secs", async () => {
      const [pinging, quiet] = await Promise.all([
        startServer(["--grpc-keepalive-time-secs", "0.3", "--grpc-keepalive-timeout-secs", "0.3"]),
        startServer([]),
      ]);
      try {
        const [dropped, kept] = await Promise.all([mutePeer(pinging.grpcPort, 4_000), mutePeer(quiet.grpcPort, 2_000)]);
        assert.ok(dropped < 3_000, `closed after ${dropped} ms`);
        assert.equal(kept, Number.POSITIVE_INFINITY, "without keepalive a mute peer is left alone");
      } finally {
        await Promise.all([pinging.stop(), quiet.stop()]);
      }
    });
  });
});
