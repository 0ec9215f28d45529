import { ConfigError } from "../../../../lib/model-repository/config.js";
import type { ModelSpec } from "../../../../lib/model-repository/spec.js";
import type { Tensor } from "../../tensors/tensor.js";
import type { Engine, EngineFactory, EngineRequest, EngineResponse } from "../engine.js";

/**
 * `backend: "identity"`, as Triton's identity backend: OUTPUTn is INPUTn, pairing the
 * n-th declared input with the n-th declared output. Raw bytes pass through untouched.
 */
class IdentityEngine implements Engine {
  /** Input name -> output name. */
  constructor(private readonly outputFor: ReadonlyMap<string, string>) {}

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

export const identityEngineFactory: EngineFactory = {
  backend: "identity",
  create(spec: ModelSpec, source: string): Engine {
    if (spec.inputs.length !== spec.outputs.length) {
      throw new ConfigError(
        source,
        `backend identity: the model declares ${spec.inputs.length} inputs and ${spec.outputs.length} outputs; it needs one output per input`,
      );
    }
    const outputFor = new Map<string, string>();
    spec.inputs.forEach((input, index) => {
      const output = spec.outputs[index]!;
      if (output.datatype !== input.datatype) {
        throw new ConfigError(
          source,
          `backend identity: output[${index}] '${output.name}' is ${output.datatype} but input[${index}] '${input.name}' is ${input.datatype}`,
        );
      }
      outputFor.set(input.name, output.name);
    });
    return new IdentityEngine(outputFor);
  },
};
