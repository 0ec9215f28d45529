import { once } from "node:events";
import type { ServerResponse } from "node:http";
import type { FastifyReply } from "fastify";
import { errorMessage } from "../../../lib/errors.js";

/**
 * A Server-Sent Events reply (text/event-stream): one `data:` event per response. Writing
 * waits while the socket is full (a slow reader slows its own stream only, never the
 * server) and stops when the client is gone.
 */
export class EventStream {
  private started = false;

  constructor(private readonly response: ServerResponse) {}

  /** The client is gone (the request's signal is aborted too). */
  get closed(): boolean {
    return this.response.destroyed || this.response.writableEnded;
  }

  /** Sends one event whose data is `data` (JSON text, or a literal such as "[DONE]"). */
  async send(data: string): Promise<void> {
    this.start();
    if (this.closed) return;
    if (!this.response.write(`data: ${data}\n\n`)) await drained(this.response);
  }

  /** Ends the stream (headers are sent first if no event was). */
  end(): void {
    this.start();
    if (!this.closed) this.response.end();
  }

  private start(): void {
    if (this.started) return;
    this.started = true;
    this.response.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      connection: "keep-alive",
    });
    this.response.flushHeaders();
  }
}

/** Resolves when the response can take more, or is closed. */
async function drained(response: ServerResponse): Promise<void> {
  const controller = new AbortController();
  try {
    await Promise.race([
      once(response, "drain", { signal: controller.signal }),
      once(response, "close", { signal: controller.signal }),
    ]);
  } catch (error) {
    if ((error as Error).name !== "AbortError") throw new Error(errorMessage(error));
  } finally {
    controller.abort();
  }
}

/** How the responses of a streamed reply become events. */
export interface EventsOf<Response> {
  /** The event data of one response. */
  each(response: Response): string;
  /** Event data after the last response (e.g. a usage chunk, `[DONE]`). */
  last?(): string[];
  /** The event data telling of an error after the stream has begun. */
  error(error: unknown): string;
}

/**
 * Answers with the Server-Sent Events of `responses`. An error before the first response is
 * thrown, so it becomes an HTTP status; a later one is an event. Whatever happens, the
 * responses are closed (the request's work stops if the client went away) and the stream ends.
 */
export async function replyWithEvents<Response>(
  reply: FastifyReply,
  responses: AsyncIterator<Response>,
  events: EventsOf<Response>,
): Promise<void> {
  const first = await responses.next();
  reply.hijack();
  const stream = new EventStream(reply.raw);
  try {
    for (let step = first; !step.done; step = await responses.next()) {
      await stream.send(events.each(step.value));
      if (stream.closed) return;
    }
    for (const data of events.last?.() ?? []) await stream.send(data);
  } catch (error) {
    await stream.send(events.error(error));
  } finally {
    await responses.return?.(undefined);
    stream.end();
  }
}
