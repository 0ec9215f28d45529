import assert from "node:assert/strict";
import { createServer, type Server } from "node:net";
import { pino } from "pino";
import { accepts, freePorts } from "../../../e2e/support/ports.js";
import { startDataPlane } from "../../src/dataplane.js";
import { dataPlaneOptions } from "../../src/main.js";
import { parsedDataPlaneArguments } from "../../../cli/dataplane.js";
import { EXAMPLES } from "../fixtures/paths.js";

/**
 * The command line exits on a failed start, which closes everything anyway; in-process (a
 * --grpc-workers worker, an embedding, a test) a failed start must not leave ports bound.
 */
describe("a data plane whose start-up fails (in process)", () => {
  let squatter: Server | undefined;
  afterEach(async () => {
    await new Promise((resolve) => (squatter ? squatter.close(resolve) : resolve(undefined)));
    squatter = undefined;
  });

  const start = async (args: readonly string[]): Promise<unknown> =>
    startDataPlane(dataPlaneOptions(await parsedDataPlaneArguments(["--host", "127.0.0.1", ...args]), silent));

  it("closes the gRPC port it had bound when the HTTP port is taken", async () => {
    const [grpc, http, metrics] = (await freePorts(3)) as [number, number, number];
    squatter = await listenOn(http);
    const ports = ["--grpc-port", String(grpc), "--http-port", String(http), "--metrics-port", String(metrics)];
    await assert.rejects(start(["--model-repository", EXAMPLES, ...ports]), /EADDRINUSE/);
    assert.equal(await accepts(grpc), false, "the gRPC port is still open");
  });

  it("closes all three ports when the model repository cannot be read", async () => {
    const [grpc, http, metrics] = (await freePorts(3)) as [number, number, number];
    const ports = ["--grpc-port", String(grpc), "--http-port", String(http), "--metrics-port", String(metrics)];
    await assert.rejects(start(["--model-repository", "/no/such/repo", ...ports]), /cannot be read/);
    for (const port of [grpc, http, metrics]) assert.equal(await accepts(port), false, `port ${port} is still open`);
  });
});

const silent = pino({ level: "silent" });

function listenOn(port: number): Promise<Server> {
  const server = createServer();
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve(server));
  });
}
