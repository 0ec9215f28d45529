import assert from "node:assert/strict";
import { protocolsPage } from "../protocols.js";
import { startServedDataPlane, type ServedDataPlane } from "../served.js";

describe("the protocol reference, read from a data plane started to be asked (tools/docs/)", function () {
  this.timeout(60_000);
  let served: ServedDataPlane;
  let page: string;
  before(async () => {
    served = await startServedDataPlane();
    page = await protocolsPage(served);
  });
  after(() => served.stop());

  it("records every RPC the gRPC server registers, health and reflection included", () => {
    const paths = served.grpcMethods.map(({ path }) => path);
    for (const path of [
      "/inference.GRPCInferenceService/ModelInfer",
      "/inference.GRPCInferenceService/TraceSetting",
      "/grpc.health.v1.Health/Watch",
      "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    ]) {
      assert.ok(paths.includes(path), `${path} not recorded`);
    }
  });

  it("lists an RPC that answers UNIMPLEMENTED with the reason it gives, and one that works as served", () => {
    assert.match(
      page,
      /^\| <code>TraceSetting<\/code> \| unary \| UNIMPLEMENTED \| TraceSetting is not implemented by this data plane: .+ \|$/m,
    );
    assert.match(page, /^\| <code>ModelInfer<\/code> \| unary \| served \| {3}\|$/m);
    assert.match(page, /^\| <code>ModelStreamInfer<\/code> \| bidirectional streaming \| served \| {3}\|$/m);
    assert.match(page, /^\| <code>Watch<\/code> \| server streaming \| served \| {3}\|$/m);
  });

  it("lists the front door's routes, a 501 one with its reason", () => {
    assert.ok(served.httpRoutes.some(({ method, url }) => method === "POST" && url === "/v2/models/:model/infer"));
    assert.match(page, /^\| POST \| <code>\/v2\/models\/:model\/infer<\/code> \| KServe v2 \| served \| {3}\|$/m);
    assert.match(
      page,
      /^\| POST \| <code>\/v2\/systemsharedmemory\/region\/:region\/register<\/code> \| KServe v2 \| 501 Not Implemented \| Client shared memory is disabled\. .+ \|$/m,
    );
  });
});
