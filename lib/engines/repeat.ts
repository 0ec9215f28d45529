import { ConfigError } from "../model-repository/config.js";
import type { Datatype } from "../model-repository/datatypes.js";
import type { ModelSpec } from "../model-repository/spec.js";
import type { EngineDescription } from "./description.js";

/**
 * `backend: "repeat"`, a decoupled test engine modelled on Triton's repeat backend: an
 * INT32 input `IN` of N elements gives N responses (`OUT`, optional `IDX`); optional UINT32
 * inputs `DELAY` and `WAIT`.
 */
export interface RepeatSettings {
  /** Whether the model declares the optional `IDX` output. */
  readonly hasIdx: boolean;
}

export const repeatEngine: EngineDescription<RepeatSettings> = {
  name: "repeat",
  scheduled: true,
  settings(spec, source) {
    const problem = (detail: string): ConfigError => new ConfigError(source, `backend repeat: ${detail}`);
    if (!spec.decoupled) throw problem("needs model_transaction_policy { decoupled: true }");
    const expect = (list: ModelSpec["inputs"], name: string, datatype: Datatype, required: boolean): boolean => {
      const tensor = list.find((candidate) => candidate.name === name);
      if (tensor === undefined) {
        if (required) throw problem(`declare '${name}' (${datatype})`);
        return false;
      }
      if (tensor.datatype !== datatype) throw problem(`'${name}' must be ${datatype}, not ${tensor.datatype}`);
      return true;
    };
    expect(spec.inputs, "IN", "INT32", true);
    expect(spec.inputs, "DELAY", "UINT32", false);
    expect(spec.inputs, "WAIT", "UINT32", false);
    expect(spec.outputs, "OUT", "INT32", true);
    return { hasIdx: expect(spec.outputs, "IDX", "UINT32", false) };
  },
};
