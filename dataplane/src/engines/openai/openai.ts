import { createParser, type EventSourceMessage } from "eventsource-parser";
import { errors as undiciErrors, request, type Dispatcher } from "undici";
import { abortedError, DataPlaneError, invalidArgument, internal, type ErrorKind } from "../../../../lib/errors.js";
import type { OpenAiSettings } from "../../../../lib/engines/openai.js";
import type { Engine, EngineRequest, EngineResponse, InferOptions } from "../engine.js";
import { llmOutputs, readLlmRequest, type LlmRequest } from "../llm-tensors.js";

/**
 * The `openai` engine: an LLM model served by an OpenAI-compatible HTTP server (vLLM,
 * SGLang, TGI, llama.cpp server). `text_input` becomes the prompt (or, with
 * `mode: chat`, the messages: a JSON list of {role, content} or plain text as one user
 * message); the sampling values (request parameters, vLLM's sampling_parameters with its
 * other keys passed on as they are, TensorRT-LLM's inputs) become the same request fields; each choice gives
 * one `text_output` and one `finish_reason` element. With `streaming` true on a decoupled
 * model the upstream streams (SSE) and every event becomes one response.
 * Parameters: `url` (e.g. http://vllm:8000/v1), `upstream_model` (default: the model's
 * name), `mode` (completions | chat), `api_key_env` (environment variable holding a key).
 */

/** The checked settings, and the key read from the environment variable they name. */
interface Settings extends OpenAiSettings {
  readonly apiKey: string | undefined;
}

interface Choice {
  index?: number;
  text?: string;
  message?: { content?: string | null };
  delta?: { content?: string | null };
  finish_reason?: string | null;
}

const KIND_OF_HTTP_STATUS = (code: number): ErrorKind =>
  code === 400 || code === 422
    ? "InvalidArgument"
    : code === 404
      ? "NotFound"
      : code === 429
        ? "ResourceExhausted"
        : code === 408 || code === 504
          ? "DeadlineExceeded"
          : code >= 500
            ? "Unavailable"
            : "Internal";

export class OpenAiEngine implements Engine {
  private readonly settings: Settings;

  constructor(settings: OpenAiSettings) {
    const { apiKeyVariable } = settings;
    this.settings = { ...settings, apiKey: apiKeyVariable === undefined ? undefined : process.env[apiKeyVariable] };
  }

  async *infer(engineRequest: EngineRequest, { signal, traceHeaders }: InferOptions): AsyncIterable<EngineResponse> {
    const llm = readLlmRequest(engineRequest, this.settings.layout, false);
    if (llm.streaming && !this.settings.decoupled) {
      throw invalidArgument(
        `model '${this.settings.model}': streaming=true needs a decoupled model (model_transaction_policy { decoupled: true }) and ModelStreamInfer`,
      );
    }
    const path = this.settings.chat ? "/chat/completions" : "/completions";
    const response = await this.post(path, this.body(llm), signal, traceHeaders);
    const wanted = engineRequest.requestedOutputs;
    if (!llm.streaming) {
      const json = (await response.body.json()) as { choices?: Choice[] };
      const choices = json.choices ?? [];
      // Triton's vLLM and TensorRT-LLM backends answer with the prompt, then the generated text.
      const echo = llm.echoPrompt ? llm.prompt : "";
      yield {
        outputs: llmOutputs(
          choices.map((choice) => echo + (this.settings.chat ? (choice.message?.content ?? "") : (choice.text ?? ""))),
          choices.map((choice) => choice.finish_reason ?? ""),
          wanted,
          llm,
        ),
      };
      return;
    }
    for await (const choices of this.events(response.body, signal)) {
      yield {
        outputs: llmOutputs(
          choices.map((choice) => (this.settings.chat ? (choice.delta?.content ?? "") : (choice.text ?? ""))),
          choices.map((choice) => choice.finish_reason ?? ""),
          wanted,
          llm,
        ),
      };
    }
  }

  async close(): Promise<void> {}

  private body(llm: LlmRequest): Record<string, unknown> {
    const { sampling } = llm;
    return {
      model: this.settings.upstreamModel,
      ...(this.settings.chat ? { messages: messagesOf(llm.prompt) } : { prompt: llm.prompt }),
      stream: llm.streaming,
      ...llm.extraSampling,
      ...sampling,
    };
  }

  private async post(
    path: string,
    body: unknown,
    signal: AbortSignal,
    traceHeaders: Readonly<Record<string, string>>,
  ): Promise<Dispatcher.ResponseData> {
    const url = `${this.settings.baseUrl}${path}`;
    let response: Dispatcher.ResponseData;
    try {
      response = await request(url, {
        method: "POST",
        headers: {
          ...traceHeaders,
          "content-type": "application/json",
          ...(this.settings.apiKey !== undefined ? { authorization: `Bearer ${this.settings.apiKey}` } : {}),
        },
        body: JSON.stringify(body),
        signal,
      });
    } catch (error) {
      if (signal.aborted || error instanceof undiciErrors.RequestAbortedError) {
        throw abortedError(signal);
      }
      throw new DataPlaneError(
        "Unavailable",
        `model '${this.settings.model}': upstream ${url} is unavailable: ${(error as Error).message}`,
      );
    }
    if (response.statusCode >= 400) {
      const text = await response.body.text().catch(() => "");
      throw new DataPlaneError(
        KIND_OF_HTTP_STATUS(response.statusCode),
        `model '${this.settings.model}': upstream ${url} answered HTTP ${response.statusCode}: ${upstreamMessage(text)}`,
      );
    }
    return response;
  }

  /** The choices of each server-sent event until [DONE]. */
  private async *events(body: Dispatcher.ResponseData["body"], signal: AbortSignal): AsyncIterable<Choice[]> {
    const pending: Choice[][] = [];
    let done = false;
    let failure: Error | undefined;
    const parser = createParser({
      onEvent: (event: EventSourceMessage) => {
        if (event.data === "[DONE]") {
          done = true;
          return;
        }
        try {
          const parsed = JSON.parse(event.data) as { choices?: Choice[]; error?: { message?: string } };
          if (parsed.error !== undefined) failure = internal(`upstream error: ${parsed.error.message ?? event.data}`);
          else pending.push(parsed.choices ?? []);
        } catch {
          failure = internal(`upstream sent an event that is not JSON: ${event.data.slice(0, 200)}`);
        }
      },
    });
    const decoder = new TextDecoder();
    try {
      for await (const chunk of body) {
        // stream: true keeps a character split across two chunks whole.
        parser.feed(decoder.decode(chunk as Uint8Array, { stream: true }));
        if (failure !== undefined) throw failure;
        yield* pending.splice(0);
        if (done) return;
      }
    } catch (error) {
      if (signal.aborted) throw abortedError(signal);
      if (error instanceof DataPlaneError) throw error;
      throw new DataPlaneError(
        "Unavailable",
        `model '${this.settings.model}': the upstream stream broke: ${(error as Error).message}`,
      );
    }
  }
}

function messagesOf(text: string): unknown[] {
  if (text.trimStart().startsWith("[")) {
    try {
      const parsed: unknown = JSON.parse(text);
      if (Array.isArray(parsed)) return parsed;
    } catch {
      // plain text that starts with "["
    }
  }
  return [{ role: "user", content: text }];
}

function upstreamMessage(text: string): string {
  try {
    const parsed = JSON.parse(text) as { error?: { message?: string } | string; message?: string; detail?: string };
    const error = parsed.error;
    return (typeof error === "string" ? error : error?.message) ?? parsed.message ?? parsed.detail ?? text;
  } catch {
    return text.slice(0, 500);
  }
}
