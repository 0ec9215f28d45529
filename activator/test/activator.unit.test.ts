import assert from "node:assert/strict";
import type { V1Pod } from "@kubernetes/client-node";
import { decodeGrpcMessage, encodeGrpcMessage, parseGrpcTimeout } from "../../lib/grpc/frames.js";
import { endToEndHeaders } from "../src/hop-by-hop.js";
import { readyPodOf } from "../src/kube-pods.js";
import { CLI } from "../../dataplane/test/fixtures/paths.js";
import { runFailing } from "../../e2e/support/process.js";
import { targetOf } from "../src/scaler.js";

describe("activator: its pure parts", () => {
  it("reads grpc-timeout in every unit, and nothing from a malformed one", () => {
    assert.equal(parseGrpcTimeout("60S"), 60_000);
    assert.equal(parseGrpcTimeout("2M"), 120_000);
    assert.equal(parseGrpcTimeout("1H"), 3_600_000);
    assert.equal(parseGrpcTimeout("250m"), 250);
    assert.equal(parseGrpcTimeout("5000u"), 5);
    assert.equal(parseGrpcTimeout("1000000n"), 1);
    for (const bad of [undefined, "", "S", "10", "123456789S", "1.5S", "10s", "-1S"]) {
      assert.equal(parseGrpcTimeout(bad), undefined, String(bad));
    }
  });

  it("percent-encodes grpc-message as the spec asks, and reads it back", () => {
    const text = "no pod within 0.3 s: 100% — früh";
    const encoded = encodeGrpcMessage(text);
    assert.match(encoded, /^[\x20-\x7e]*$/);
    assert.ok(encoded.includes("100%25"));
    assert.equal(decodeGrpcMessage(encoded), text);
  });

  it("passes end-to-end headers (authorization included) and drops hop-by-hop ones, those `connection` names too", () => {
    const kept = endToEndHeaders({
      ":path": "/x",
      authorization: "Bearer t",
      connection: "keep-alive, x-hop",
      "keep-alive": "timeout=5",
      "x-hop": "1",
      "transfer-encoding": "chunked",
      te: "trailers",
      "x-request-id": "r",
    });
    assert.deepEqual(kept, { authorization: "Bearer t", "x-request-id": "r" });
    assert.deepEqual(Object.keys(endToEndHeaders({ ":path": "/x" }, true)), [":path"]);
  });

  it("takes a pod as ready only when Ready, with an IP, and not being deleted", () => {
    const pod = (status: Partial<NonNullable<V1Pod["status"]>>, deleting = false): V1Pod => ({
      metadata: { name: "m-0", ...(deleting ? { deletionTimestamp: new Date() } : {}) },
      status,
    });
    const ready = [{ type: "Ready", status: "True" }];
    assert.deepEqual(readyPodOf(pod({ podIP: "10.0.0.1", conditions: ready })), { name: "m-0", ip: "10.0.0.1" });
    assert.equal(readyPodOf(pod({ conditions: ready })), undefined);
    assert.equal(readyPodOf(pod({ podIP: "10.0.0.1", conditions: [{ type: "Ready", status: "False" }] })), undefined);
    assert.equal(readyPodOf(pod({ podIP: "10.0.0.1", conditions: ready }, true)), undefined);
  });

  it("reads KEDA's target from scalerMetadata.targetHeldRequests (default 1), refusing what is not a number above 0", () => {
    const ref = (scalerMetadata: Record<string, string>) => ({ name: "m", namespace: "ns", scalerMetadata });
    assert.equal(targetOf(ref({})), 1);
    assert.equal(targetOf(ref({ targetHeldRequests: "2.5" })), 2.5);
    for (const bad of ["0", "-1", "many", "Infinity"]) {
      assert.match(String(targetOf(ref({ targetHeldRequests: bad }))), /targetHeldRequests must be a number above 0/);
    }
  });

  it("`dynamo-kserve activator` without --namespace or --pod-selector exits 1 saying which", async () => {
    const noNamespace = await runFailing([CLI, "activator", "--pod-selector", "dynamokserve.dev/model=m"]);
    assert.equal(noNamespace.code, 1);
    assert.match(noNamespace.stderr, /--namespace is required/);
    const noSelector = await runFailing([CLI, "activator", "--namespace", "ns"]);
    assert.match(noSelector.stderr, /--pod-selector is required/);
  });
});
