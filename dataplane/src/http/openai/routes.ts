import { randomUUID } from "node:crypto";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { runInference, type Entry } from "../../inference/pipeline.js";
import { httpErrorOf } from "../errors.js";
import { httpLifetime } from "../lifetime.js";
import type { FrontDoor } from "../front-door.js";
import { jsonBody, sendJson } from "../json.js";
import { replyWithEvents } from "../sse.js";
import { speaksLlm } from "../../../../lib/engines/llm.js";
import { notFound } from "../../../../lib/errors.js";
import { llmInferRequest, llmResponseText, readOpenAiRequest, type OpenAiKind } from "./requests.js";

/**
 * The OpenAI-compatible routes over every model with the LLM tensor interface, whatever
 * its engine: `/v1/models`, `/v1/completions` and `/v1/chat/completions`, with `stream`
 * as Server-Sent Events ending in `data: [DONE]`. A model that streams (decoupled) makes
 * one response per token, so its responses count as completion tokens in `usage`.
 */

interface Shape {
  readonly object: string;
  readonly chunkObject: string;
  readonly idPrefix: string;
  /** A choice of a whole reply. */
  choice(text: string, finishReason: string | null): Record<string, unknown>;
  /** A choice of a stream chunk (`first`: the chunk that opens the message). */
  delta(text: string, finishReason: string | null, first: boolean): Record<string, unknown>;
}

const SHAPES: Readonly<Record<OpenAiKind, Shape>> = {
  completions: {
    object: "text_completion",
    chunkObject: "text_completion",
    idPrefix: "cmpl-",
    choice: (text, finishReason) => ({ index: 0, text, logprobs: null, finish_reason: finishReason }),
    delta: (text, finishReason) => ({ index: 0, text, logprobs: null, finish_reason: finishReason }),
  },
  chat_completions: {
    object: "chat.completion",
    chunkObject: "chat.completion.chunk",
    idPrefix: "chatcmpl-",
    choice: (text, finishReason) => ({
      index: 0,
      message: { role: "assistant", content: text },
      logprobs: null,
      finish_reason: finishReason,
    }),
    delta: (text, finishReason, first) => ({
      index: 0,
      delta: first ? { role: "assistant", content: text } : { content: text },
      logprobs: null,
      finish_reason: finishReason,
    }),
  },
};

export function openaiRoutes(app: FastifyInstance, door: FrontDoor): void {
  const llmModels = () => door.inference.registry.readyModels().filter(({ spec }) => speaksLlm(spec));
  const modelObject = ({ spec, loadedAt }: ReturnType<typeof llmModels>[number]) => ({
    id: spec.name,
    object: "model",
    created: Math.floor(loadedAt / 1000),
    owned_by: "dynamo-kserve",
  });
  app.get("/v1/models", async () => ({ object: "list", data: llmModels().map(modelObject) }));
  // The openai SDK's models.retrieve: a model /v1/models lists, else 404 in OpenAI's shape
  // (the rest of the path is the id: OpenAI ids may hold a '/').
  app.get<{ Params: { "*": string } }>("/v1/models/*", async (request) => {
    const id = request.params["*"];
    const found = llmModels().find(({ spec }) => spec.name === id);
    if (found === undefined) throw notFound(`the model '${id}' does not exist or does not serve the OpenAI routes`);
    return modelObject(found);
  });
  app.post("/v1/completions", async (request, reply) => complete("completions", request, reply, door));
  app.post("/v1/chat/completions", async (request, reply) => complete("chat_completions", request, reply, door));
}

async function complete(
  kind: OpenAiKind,
  request: FastifyRequest,
  reply: FastifyReply,
  door: FrontDoor,
): Promise<void> {
  const body = await jsonBody(request, "the request body");
  const openai = readOpenAiRequest(kind, body);
  const spec = door.inference.registry.resolve(openai.model, "").model.spec;
  const inferRequest = llmInferRequest(spec, openai);
  const entry: Entry = {
    endpoint: kind,
    requestType: openai.stream ? "stream" : "unary",
    protocol: "http",
    gathersResponses: true,
  };
  const shape = SHAPES[kind];
  const id = `${shape.idPrefix}${randomUUID()}`;
  const created = Math.floor(Date.now() / 1000);
  const lifetime = httpLifetime(request.headers, reply.raw);
  const responses = runInference(door.inference, inferRequest, entry, lifetime)[Symbol.asyncIterator]();
  const promptTokens = wordCount(openai.prompt);
  if (!openai.stream) {
    let text = "";
    let finishReason: string | null = null;
    let count = 0;
    for (let step = await responses.next(); !step.done; step = await responses.next()) {
      const part = llmResponseText(step.value);
      text += part.text;
      finishReason = part.finishReason ?? finishReason;
      if (part.text !== "") count++;
    }
    const usage = spec.decoupled ? usageOf(promptTokens, count) : undefined;
    await sendJson(reply, {
      id,
      object: shape.object,
      created,
      model: openai.model,
      choices: [shape.choice(text, finishReason ?? "stop")],
      ...(usage === undefined ? {} : { usage }),
    });
    return;
  }
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}): string =>
    JSON.stringify({ id, object: shape.chunkObject, created, model: openai.model, choices, ...extra });
  let count = 0;
  let finished = false;
  await replyWithEvents(reply, responses, {
    each: (response) => {
      const part = llmResponseText(response);
      const data = chunk([shape.delta(part.text, part.finishReason, count === 0 && !finished)]);
      if (part.text !== "") count++;
      finished ||= part.finishReason !== null;
      return data;
    },
    last: () => [
      ...(finished ? [] : [chunk([shape.delta("", "stop", count === 0)])]),
      ...(openai.includeUsage ? [chunk([], { usage: usageOf(promptTokens, count) })] : []),
      "[DONE]",
    ],
    error: (error) => {
      const failure = httpErrorOf(error);
      return JSON.stringify({ error: { message: failure.message, type: "server_error", code: failure.status } });
    },
  });
}

/** Prompt tokens as the mock engines count them: words. */
function wordCount(text: string): number {
  const trimmed = text.trim();
  return trimmed === "" ? 0 : trimmed.split(/\s+/).length;
}

const usageOf = (promptTokens: number, completionTokens: number): Record<string, number> => ({
  prompt_tokens: promptTokens,
  completion_tokens: completionTokens,
  total_tokens: promptTokens + completionTokens,
});
