import type { ModelInferRequest, ModelInferResponse } from "../../../proto/gen/ts/grpc_service.js";
import { speaksLlm, TEXT_INPUT, TEXT_OUTPUT } from "../../../lib/engines/llm.js";
import type { ModelSpec } from "../../../lib/model-repository/spec.js";
import { invalidArgument } from "../../../lib/errors.js";
import type { Datatype } from "../../../lib/model-repository/datatypes.js";
import { samplingInputs } from "../tensors/sampling-inputs.js";
import { joinBytesElements, splitBytesElements } from "../tensors/bytes.js";
import { emptyContents, rawToTyped } from "../tensors/typed.js";

/**
 * Modular MAX's KServe clients send a prompt as one input with no datatype or shape whose
 * `contents.int_contents` are the prompt's character codes, and read the answer back from
 * the first output's `int_contents`. For a model with the LLM tensor interface, such a
 * request is read as the BYTES `text_input` it means, and each response's `text_output` is
 * written back as character codes, so the client gets its answer in the form it asked in.
 *
 * This is the one reply in typed contents: every other request is answered in
 * raw_output_contents, as Triton answers, typed inputs included. The two are told apart by
 * the request alone: MAX's form is exactly one input without a datatype (which no KServe
 * tensor lacks) or shape, holding int_contents, sent to a model with the LLM interface.
 */

/** The request rewritten to the LLM tensor interface, or undefined when it is not in MAX's form. */
export function fromCharacterCodes(request: ModelInferRequest, spec: ModelSpec): ModelInferRequest | undefined {
  if (request.inputs.length !== 1 || request.rawInputContents.length > 0 || !speaksLlm(spec)) return undefined;
  const [prompt] = request.inputs;
  if (prompt === undefined || prompt.datatype !== "" || prompt.shape.length > 0) return undefined;
  const codes = prompt.contents?.intContents ?? [];
  if (codes.length === 0) return undefined;
  let text: string;
  try {
    text = String.fromCodePoint(...codes);
  } catch {
    throw invalidArgument(
      `input '${prompt.name}': int_contents without a datatype are read as a prompt's character codes; ${codes.find((code) => code < 0 || code > 0x10ffff)} is not one`,
    );
  }
  const batch = spec.maxBatchSize > 0 ? [1n] : [];
  const declared = spec.inputs.find((tensor) => tensor.name === TEXT_INPUT)!;
  const promptShape = declared.dims.length > 1 ? declared.dims.map(() => 1n) : [1n];
  // TensorRT-LLM's layout takes max_tokens (MAX's string parameter) as an input.
  const sampling = samplingInputs(spec, request.parameters);
  return {
    ...request,
    inputs: [
      { name: TEXT_INPUT, datatype: "BYTES", shape: [...batch, ...promptShape], parameters: {}, contents: undefined },
      ...sampling.inputs,
    ],
    rawInputContents: [joinBytesElements([Buffer.from(text, "utf8")]), ...sampling.raw],
    // The answer first: MAX's clients read outputs[0].
    outputs: request.outputs.length > 0 ? request.outputs : [{ name: TEXT_OUTPUT, parameters: {} }],
  };
}

/**
 * A response in typed contents, as MAX's clients read it: its `text_output` as INT32
 * character codes, first among the outputs; any other output typed as it is.
 */
export function toCharacterCodes(response: ModelInferResponse): ModelInferResponse {
  const typed = response.outputs.map((output, at) => {
    const raw = response.rawOutputContents[at] ?? new Uint8Array(0);
    if (output.name !== TEXT_OUTPUT) return { ...output, contents: rawToTyped(output.datatype as Datatype, raw) };
    const element = splitBytesElements(raw)[0];
    const text = element === undefined ? "" : Buffer.from(element).toString("utf8");
    const codes = Array.from(text, (character) => character.codePointAt(0)!);
    return {
      ...output,
      datatype: "INT32",
      shape: [BigInt(codes.length)],
      contents: { ...emptyContents(), intContents: codes },
    };
  });
  const answer = typed.filter((output) => output.name === TEXT_OUTPUT);
  return {
    ...response,
    outputs: [...answer, ...typed.filter((output) => output.name !== TEXT_OUTPUT)],
    rawOutputContents: [],
  };
}
