import type { IdentitySettings } from "../../../../lib/engines/identity.js";
import type { Tensor } from "../../tensors/tensor.js";
import type { Engine, EngineRequest, EngineResponse } from "../engine.js";

/**
 * `backend: "identity"`, as Triton's identity backend: OUTPUTn is INPUTn, pairing the
 * n-th declared input with the n-th declared output. Raw bytes pass through untouched.
 */
export class IdentityEngine implements Engine {
  private readonly outputFor: ReadonlyMap<string, string>;

  constructor({ outputFor }: IdentitySettings) {
    this.outputFor = outputFor;
  }

  async *infer(request: EngineRequest): AsyncIterable<EngineResponse> {
    const outputs: Tensor[] = [];
    for (const input of request.inputs) {
      const name = this.outputFor.get(input.name);
      if (name === undefined) continue;
      if (request.requestedOutputs.size > 0 && !request.requestedOutputs.has(name)) continue;
      outputs.push({ name, datatype: input.datatype, shape: input.shape, data: input.data });
    }
    yield { outputs };
  }

  async close(): Promise<void> {}
}
