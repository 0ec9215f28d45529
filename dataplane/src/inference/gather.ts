import type { ModelInferResponse, ModelInferResponse_InferOutputTensor } from "../../../proto/gen/ts/grpc_service.js";
import { DataPlaneError } from "../../../lib/errors.js";
import { joinBytesElements, splitBytesElements } from "../tensors/bytes.js";

/**
 * A decoupled model's responses gathered into one reply, for a caller that takes one
 * (ModelInfer on a model that opts in, generate): an output that is one text element in
 * consecutive responses (BYTES, one element: an LLM's tokens) is the concatenation of those texts,
 * joined as bytes so a character split across responses stays whole; any other output is
 * the last one sent. The id, version and parameters are the last response's. Responses are
 * in raw outputs, as the pipeline encodes them. What is held is bounded by the reply's
 * limit (--max-message-size): a model that goes on past it (an LLM asked for a million
 * tokens) fails the request RESOURCE_EXHAUSTED instead of filling memory.
 */
export class ResponseGatherer {
  private last: ModelInferResponse | undefined;
  /** Each output by name, in the order first seen: its latest tensor, and the texts so far when it is text. */
  private readonly outputs = new Map<string, GatheredOutput>();
  /** The bytes the outputs hold now (each output's texts, or its latest data). */
  private held = 0;

  /** `limitBytes`: the most the gathered outputs may hold; `model` names the model in the error. */
  constructor(
    private readonly limitBytes: number,
    private readonly model: string,
  ) {}

  add(response: ModelInferResponse): void {
    this.last = response;
    response.outputs.forEach((output, index) => {
      const data = response.rawOutputContents[index] ?? new Uint8Array(0);
      const text = oneText(output, data);
      const before = this.outputs.get(output.name);
      // Text after text is appended; anything else starts over from this response's.
      let texts: Uint8Array[] | undefined;
      let bytes = data.length;
      if (text !== undefined) {
        texts = before?.texts ?? [];
        texts.push(text);
        bytes = (before?.texts !== undefined ? before.bytes : 0) + text.length;
      }
      this.held += bytes - (before?.bytes ?? 0);
      this.outputs.set(output.name, { output, data, texts, bytes });
    });
    if (this.held > this.limitBytes) {
      throw new DataPlaneError(
        "ResourceExhausted",
        `model '${this.model}': its responses gathered into one reply exceed the limit of ${this.limitBytes} bytes (--max-message-size); ask for less (max_tokens) or stream them`,
      );
    }
  }

  /** The one reply, or undefined when there was no response. */
  result(): ModelInferResponse | undefined {
    if (this.last === undefined) return undefined;
    const gathered = [...this.outputs.values()];
    return {
      ...this.last,
      outputs: gathered.map(({ output }) => output),
      rawOutputContents: gathered.map(({ data, texts }) =>
        texts === undefined || texts.length === 1 ? data : joinBytesElements([Buffer.concat(texts)]),
      ),
    };
  }
}

interface GatheredOutput {
  readonly output: ModelInferResponse_InferOutputTensor;
  readonly data: Uint8Array;
  /** The texts of the responses since the last that had none; undefined when the latest had none. */
  readonly texts: Uint8Array[] | undefined;
  /** What it holds: its texts' bytes, or its data's. */
  readonly bytes: number;
}

/** The text of an output holding one BYTES element, else undefined. */
function oneText(output: ModelInferResponse_InferOutputTensor, data: Uint8Array): Uint8Array | undefined {
  if (output.datatype !== "BYTES" || output.shape.some((dim) => dim !== 1n)) return undefined;
  const elements = splitBytesElements(data);
  return elements.length === 1 ? elements[0] : undefined;
}
