import assert from "node:assert/strict";
import { useServer } from "../fixtures/serving.js";

/**
 * The scheduler's request parameters on KServe v2 REST: the body's `parameters.priority` and
 * `parameters.timeout` are read as the gRPC request's parameters are, checked against the
 * model's dynamic_batching, and not handed to the model.
 */

const RANKED = `
name: "ranked"
backend: "identity"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
dynamic_batching {
  priority_levels: 2
  default_priority_level: 2
  priority_queue_policy { key: 1 value { default_timeout_microseconds: 5000000 allow_timeout_override: true } }
}
`;

describe("the priority and timeout parameters on KServe v2 REST", function () {
  this.timeout(30_000);
  const serving = useServer({ ranked: RANKED });
  const infer = (parameters: Record<string, unknown>): Promise<Response> =>
    fetch(`http://127.0.0.1:${serving.server.httpPort}/v2/models/ranked/infer`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        parameters,
        inputs: [{ name: "INPUT0", shape: [1, 2], datatype: "FP32", data: [1, 2] }],
      }),
    });

  it("takes a priority within the levels and a timeout its level allows, and keeps them from the model", async () => {
    const reply = await infer({ priority: 1, timeout: 1_000_000 });
    assert.equal(reply.status, 200, await reply.clone().text());
    const body = (await reply.json()) as { parameters?: Record<string, unknown>; outputs: { data: number[] }[] };
    assert.deepEqual(body.outputs[0]!.data, [1, 2]);
    assert.equal(body.parameters?.["priority"], undefined);
    assert.equal((await infer({ priority: 0 })).status, 200);
  });

  it("refuses a priority outside the levels 400, naming them", async () => {
    const reply = await infer({ priority: 3 });
    assert.equal(reply.status, 400);
    const { error } = (await reply.json()) as { error: string };
    assert.match(error, /parameters\["priority"\] 3 is not a priority level: its levels are 1\.\.2/);
  });

  it("refuses a timeout where the level's policy does not allow one 400, naming the field to set", async () => {
    const reply = await infer({ priority: 2, timeout: 1000 });
    assert.equal(reply.status, 400);
    const { error } = (await reply.json()) as { error: string };
    assert.match(error, /parameters\["timeout"\] is not allowed.*default_queue_policy\.allow_timeout_override: true/);
    const text = await infer({ timeout: "soon" });
    assert.equal(text.status, 400);
    assert.match(((await text.json()) as { error: string }).error, /parameters\["timeout"\] must be a whole number/);
  });
});
