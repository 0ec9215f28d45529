import type { InferParameter, ModelInferRequest } from "../../../../proto/gen/ts/grpc_service.js";
import {
  EXCLUDE_INPUT_IN_OUTPUT,
  FINISH_REASON,
  RETURN_FINISH_REASON,
  speaksLlm,
  STOP_WORDS,
  STREAMING_INPUTS,
  TEXT_INPUT,
  TEXT_OUTPUT,
} from "../../../../lib/engines/llm.js";
import { invalidArgument } from "../../../../lib/errors.js";
import type { ModelSpec } from "../../../../lib/model-repository/spec.js";
import { joinBytesElements, splitBytesElements } from "../../tensors/bytes.js";
import { samplingInputs } from "../../tensors/sampling-inputs.js";
import { parameterError } from "../errors.js";

/**
 * OpenAI request bodies read into the LLM tensor interface (lib/engines/llm.ts): the prompt
 * becomes `text_input`, the sampling fields the request parameters the gRPC path uses, and
 * `text_output` / `finish_reason` of each response become the reply's text and reason.
 */

export type OpenAiKind = "completions" | "chat_completions";

export interface OpenAiRequest {
  readonly model: string;
  readonly prompt: string;
  readonly stream: boolean;
  /** stream_options.include_usage: a last chunk with the usage. */
  readonly includeUsage: boolean;
  readonly parameters: Record<string, InferParameter>;
  /** `stop`: sequences that end the answer (none: []). */
  readonly stop: readonly string[];
}

const SAMPLING = {
  max_tokens: "int",
  max_completion_tokens: "int",
  temperature: "number",
  top_p: "number",
  top_k: "int",
  seed: "int",
  presence_penalty: "number",
  frequency_penalty: "number",
} as const;

/** Fields clients send that change nothing here, accepted when they ask for the default. */
const IGNORED = new Set(["user", "metadata", "store", "service_tier", "logit_bias", "parallel_tool_calls"]);
/** Fields whose only supported value is their default. */
const DEFAULTS: Readonly<Record<string, readonly unknown[]>> = {
  n: [1],
  best_of: [1],
  echo: [false],
  logprobs: [false, null],
  top_logprobs: [null, 0],
  suffix: [null, ""],
  tools: [null],
  tool_choice: [null, "none"],
  response_format: [null],
};
const COMMON = new Set(["model", "stream", "stream_options", "stop", ...Object.keys(SAMPLING), ...IGNORED]);
const OWN_FIELDS: Readonly<Record<OpenAiKind, ReadonlySet<string>>> = {
  completions: new Set(["prompt"]),
  chat_completions: new Set(["messages"]),
};

/** Reads and checks an OpenAI completions or chat completions body. */
export function readOpenAiRequest(kind: OpenAiKind, body: Record<string, unknown>): OpenAiRequest {
  for (const [field, value] of Object.entries(body)) {
    if (COMMON.has(field) || OWN_FIELDS[kind].has(field)) continue;
    const allowed = DEFAULTS[field];
    if (allowed === undefined) throw parameterError(field, `unknown field '${field}'`);
    if (!allowed.includes(value)) {
      throw parameterError(
        field,
        `'${field}': only ${allowed.map((item) => JSON.stringify(item)).join(" or ")} is supported by this server`,
      );
    }
  }
  if (typeof body.model !== "string" || body.model === "") throw invalidArgument("'model' must be a model's name");
  const stream = body.stream ?? false;
  if (typeof stream !== "boolean") throw invalidArgument("'stream' must be true or false");
  return {
    model: body.model,
    prompt: kind === "completions" ? promptOf(body.prompt) : chatPrompt(body.messages),
    stream,
    includeUsage: includeUsage(body.stream_options),
    parameters: samplingParameters(body),
    stop: stopOf(body.stop),
  };
}

function promptOf(prompt: unknown): string {
  if (typeof prompt === "string") return prompt;
  if (Array.isArray(prompt) && prompt.length === 1 && typeof prompt[0] === "string") return prompt[0];
  if (Array.isArray(prompt) && prompt.length > 1) {
    throw parameterError("prompt", "'prompt': one prompt per request (a list of several is not supported)");
  }
  throw invalidArgument("'prompt' must be a string");
}

/**
 * The chat as one prompt. The models behind the LLM tensor interface take text, not
 * messages, and have no chat template here: one user message is the prompt as it is; a
 * longer chat is one `role: content` line per message, then `assistant:`.
 */
function chatPrompt(messages: unknown): string {
  if (!Array.isArray(messages) || messages.length === 0) {
    throw invalidArgument("'messages' must be a non-empty array of {role, content}");
  }
  const lines = messages.map((message: unknown, index) => {
    if (typeof message !== "object" || message === null) {
      throw invalidArgument(`'messages[${index}]' must be an object with role and content`);
    }
    const { role, content } = message as { role?: unknown; content?: unknown };
    if (typeof role !== "string") throw invalidArgument(`'messages[${index}].role' must be a string`);
    return { role, content: contentText(content, index) };
  });
  if (lines.length === 1 && lines[0]!.role === "user") return lines[0]!.content;
  return `${lines.map(({ role, content }) => `${role}: ${content}`).join("\n")}\nassistant:`;
}

function contentText(content: unknown, index: number): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .map((part: unknown, partIndex) => {
        const { type, text } = (part ?? {}) as { type?: unknown; text?: unknown };
        if (type !== "text" || typeof text !== "string") {
          throw parameterError("messages", `'messages[${index}].content[${partIndex}]': only text parts are supported`);
        }
        return text;
      })
      .join("");
  }
  throw invalidArgument(`'messages[${index}].content' must be a string or an array of text parts`);
}

function includeUsage(options: unknown): boolean {
  if (options === undefined || options === null) return false;
  if (typeof options !== "object") throw invalidArgument("'stream_options' must be an object");
  const value = (options as { include_usage?: unknown }).include_usage ?? false;
  if (typeof value !== "boolean") throw invalidArgument("'stream_options.include_usage' must be true or false");
  return value;
}

/** The sampling fields as the request parameters the engines read (max_completion_tokens is max_tokens). */
function samplingParameters(body: Record<string, unknown>): Record<string, InferParameter> {
  const parameters: Record<string, InferParameter> = {};
  for (const [field, kind] of Object.entries(SAMPLING)) {
    const value = body[field];
    if (value === undefined || value === null) continue;
    if (typeof value !== "number" || (kind === "int" && !Number.isSafeInteger(value))) {
      throw invalidArgument(`'${field}' must be ${kind === "int" ? "a whole number" : "a number"}`);
    }
    const name = field === "max_completion_tokens" ? "max_tokens" : field;
    parameters[name] =
      kind === "int"
        ? { parameterChoice: { $case: "int64Param", value: BigInt(value) } }
        : { parameterChoice: { $case: "doubleParam", value } };
  }
  const stop = stopOf(body.stop);
  if (stop.length > 0) parameters["stop"] = { parameterChoice: { $case: "stringParam", value: JSON.stringify(stop) } };
  return parameters;
}

function stopOf(stop: unknown): string[] {
  if (stop === undefined || stop === null) return [];
  const words = typeof stop === "string" ? [stop] : stop;
  if (!Array.isArray(words) || !words.every((word) => typeof word === "string")) {
    throw parameterError("stop", "'stop' must be a string or an array of strings");
  }
  return words;
}

/** The inference request for an OpenAI request to an LLM-interface model. */
export function llmInferRequest(spec: ModelSpec, request: OpenAiRequest): ModelInferRequest {
  if (!speaksLlm(spec)) {
    throw invalidArgument(
      `model '${spec.name}' does not declare the LLM tensor interface (a BYTES input '${TEXT_INPUT}' and a BYTES output '${TEXT_OUTPUT}')`,
    );
  }
  const batch = spec.maxBatchSize > 0 ? [1n] : [];
  const prompt = spec.inputs.find((tensor) => tensor.name === TEXT_INPUT)!;
  const promptShape = prompt.dims.length > 1 ? prompt.dims.map(() => 1n) : [1n];
  const inputs: ModelInferRequest["inputs"] = [
    { name: TEXT_INPUT, datatype: "BYTES", shape: [...batch, ...promptShape], parameters: {}, contents: undefined },
  ];
  const rawInputContents = [joinBytesElements([Buffer.from(request.prompt, "utf8")])];
  const flag = (name: string, value: boolean): void => {
    inputs.push({ name, datatype: "BOOL", shape: [...batch, 1n], parameters: {}, contents: undefined });
    rawInputContents.push(Uint8Array.of(value ? 1 : 0));
  };
  const streaming = spec.inputs.find((tensor) => STREAMING_INPUTS.includes(tensor.name) && tensor.datatype === "BOOL");
  // A decoupled model answers token by token even when the client wants one reply: the
  // route gathers the tokens, and counts them for `usage`.
  if (streaming !== undefined) flag(streaming.name, spec.decoupled);
  // OpenAI answers never repeat the prompt and always say why they ended (vLLM's layout makes both opt-in).
  const declares = (name: string): boolean => spec.inputs.some((tensor) => tensor.name === name);
  if (declares(EXCLUDE_INPUT_IN_OUTPUT)) flag(EXCLUDE_INPUT_IN_OUTPUT, true);
  if (declares(RETURN_FINISH_REASON)) flag(RETURN_FINISH_REASON, true);
  // TensorRT-LLM's layout: one input per sampling value (max_tokens required), stop_words.
  const sampling = samplingInputs(spec, request.parameters);
  inputs.push(...sampling.inputs);
  rawInputContents.push(...sampling.raw);
  if (declares(STOP_WORDS) && request.stop.length > 0) {
    const words = request.stop.map((word) => Buffer.from(word, "utf8"));
    inputs.push({
      name: STOP_WORDS,
      datatype: "BYTES",
      shape: [...batch, BigInt(words.length)],
      parameters: {},
      contents: undefined,
    });
    rawInputContents.push(joinBytesElements(words));
  }
  const wanted = spec.outputs.filter((tensor) => tensor.name === TEXT_OUTPUT || tensor.name === FINISH_REASON);
  return {
    modelName: spec.name,
    modelVersion: "",
    id: "",
    parameters: request.parameters,
    inputs,
    outputs: wanted.map((tensor) => ({ name: tensor.name, parameters: {} })),
    rawInputContents,
  };
}

/** The text and finish reason of one response (a reason "" is none yet). */
export function llmResponseText(response: {
  outputs: readonly { name: string }[];
  rawOutputContents: readonly Uint8Array[];
}): { text: string; finishReason: string | null } {
  const first = (name: string): string | undefined => {
    const index = response.outputs.findIndex((output) => output.name === name);
    const raw = response.rawOutputContents[index];
    if (index < 0 || raw === undefined) return undefined;
    const element = splitBytesElements(raw)[0];
    return element === undefined ? undefined : Buffer.from(element).toString("utf8");
  };
  const reason = first(FINISH_REASON);
  return { text: first(TEXT_OUTPUT) ?? "", finishReason: reason === undefined || reason === "" ? null : reason };
}
