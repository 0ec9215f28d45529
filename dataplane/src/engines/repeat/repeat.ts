import type { RepeatSettings } from "../../../../lib/engines/repeat.js";
import type { Datatype } from "../../../../lib/model-repository/datatypes.js";
import type { Tensor } from "../../tensors/tensor.js";
import { rawToTyped } from "../../tensors/typed.js";
import { CpuSlices, pause } from "../pause.js";
import type { Engine, EngineRequest, EngineResponse, InferOptions } from "../engine.js";

/**
 * `backend: "repeat"`, a decoupled test engine modelled on Triton's repeat backend: for
 * an INT32 input `IN` of N elements it sends N responses, response i carrying
 * `OUT` = [IN[i]] and `IDX` = [i]. Optional UINT32 inputs: `DELAY` (milliseconds to
 * wait before response i) and `WAIT` (milliseconds to wait after the last response
 * before the request completes).
 */
export class RepeatEngine implements Engine {
  private readonly hasIdx: boolean;

  constructor({ hasIdx }: RepeatSettings) {
    this.hasIdx = hasIdx;
  }

  async *infer(request: EngineRequest, { signal }: InferOptions): AsyncIterable<EngineResponse> {
    const values = int32s(request.inputs.find((tensor) => tensor.name === "IN"));
    const delays = uint32s(request.inputs.find((tensor) => tensor.name === "DELAY"));
    const wait = uint32s(request.inputs.find((tensor) => tensor.name === "WAIT"))[0] ?? 0;
    const wanted = (name: string): boolean => request.requestedOutputs.size === 0 || request.requestedOutputs.has(name);
    // A long IN with no DELAY is CPU work: done in slices, and stopped on cancel.
    const slices = new CpuSlices(signal);
    for (let i = 0; i < values.length; i++) {
      const delay = delays[i] ?? 0;
      if (delay > 0) await pause(delay, signal);
      else await slices.step();
      const outputs: Tensor[] = [];
      if (wanted("OUT")) outputs.push(scalar("OUT", "INT32", Int32Array.of(values[i] as number)));
      if (this.hasIdx && wanted("IDX")) outputs.push(scalar("IDX", "UINT32", Uint32Array.of(i)));
      yield { outputs };
    }
    await pause(wait, signal);
  }

  async close(): Promise<void> {}
}

function scalar(name: string, datatype: Datatype, values: Int32Array | Uint32Array): Tensor {
  return { name, datatype, shape: [1], data: new Uint8Array(values.buffer) };
}

function int32s(tensor: Tensor | undefined): number[] {
  return tensor === undefined ? [] : rawToTyped("INT32", tensor.data).intContents;
}

function uint32s(tensor: Tensor | undefined): number[] {
  return tensor === undefined ? [] : rawToTyped("UINT32", tensor.data).uintContents;
}
