import assert from "node:assert/strict";
import { apiOf, routeRows, splitPath } from "../protocols.js";

describe("the protocol reference (tools/docs/protocols.ts)", () => {
  it("shows the HEAD fastify adds beside a GET on the GET's row, and a HEAD of its own alone", () => {
    const rows = routeRows([
      { method: "GET", url: "/v2" },
      { method: "HEAD", url: "/v2" },
      { method: "POST", url: "/v2" },
      { method: "HEAD", url: "/only-head" },
    ]);
    assert.deepEqual(
      rows.map(({ route, methods }) => [methods, route.url]),
      [
        ["GET, HEAD", "/v2"],
        ["POST", "/v2"],
        ["HEAD", "/only-head"],
      ],
    );
  });

  it("tells the KServe v2 routes from the OpenAI ones by their prefix", () => {
    assert.equal(apiOf("/v2"), "KServe v2");
    assert.equal(apiOf("/v2/models/:model/infer"), "KServe v2");
    assert.equal(apiOf("/v1/chat/completions"), "OpenAI");
    assert.equal(apiOf("/v20"), "");
  });

  it("splits a gRPC method's path into its service and method", () => {
    assert.deepEqual(splitPath("/inference.GRPCInferenceService/ModelInfer"), {
      service: "inference.GRPCInferenceService",
      method: "ModelInfer",
    });
  });
});
