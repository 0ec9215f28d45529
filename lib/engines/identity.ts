import { ConfigError } from "../model-repository/config.js";
import type { EngineDescription } from "./description.js";

/**
 * `backend: "identity"`, as Triton's identity backend: OUTPUTn is INPUTn, pairing the n-th
 * declared input with the n-th declared output.
 */
export interface IdentitySettings {
  /** Input name -> output name. */
  readonly outputFor: ReadonlyMap<string, string>;
}

export const identityEngine: EngineDescription<IdentitySettings> = {
  name: "identity",
  scheduled: true,
  settings(spec, source) {
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
    return { outputFor };
  },
};
