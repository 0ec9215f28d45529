import type { Readable } from "node:stream";

/** The most of a request's body kept to send again to another pod if the first refuses it unread. */
export const REPLAY_LIMIT_BYTES = 1024 * 1024;

/** Where a request's body goes: an upstream request (HTTP/2 stream or HTTP/1.1 request). */
export interface BodySink {
  write(chunk: Buffer): boolean;
  end(): void;
  once(event: "drain", listener: () => void): unknown;
}

/**
 * A client's request body pumped to an upstream with back-pressure, its first bytes kept until
 * the upstream starts its response: a pod that refuses the request before any response byte
 * (connection refused, REFUSED_STREAM, GOAWAY before it started) can be replaced by another,
 * the body sent again from the start, as long as all of it so far was kept (at most
 * REPLAY_LIMIT_BYTES). The body is not read until `attach` (while held, flow control holds
 * the client).
 */
export class ReplayableBody {
  private kept: Buffer[] | undefined = [];
  private keptBytes = 0;
  private ended = false;
  private sink: BodySink | undefined;
  private reading = false;

  constructor(private readonly source: Readable) {
    source.pause();
  }

  /** Whether a new upstream could be sent this body from its start. */
  get replayable(): boolean {
    return this.kept !== undefined;
  }

  /** Sends the body to `sink` (what was kept first, then the rest as it comes). */
  attach(sink: BodySink): void {
    this.sink = sink;
    for (const chunk of this.kept ?? []) sink.write(chunk);
    if (this.ended) {
      sink.end();
      return;
    }
    if (!this.reading) {
      this.reading = true;
      this.source.on("data", (chunk: Buffer) => this.forward(chunk));
      this.source.once("end", () => {
        this.ended = true;
        this.sink?.end();
      });
    }
    this.source.resume();
  }

  /** The upstream's response started: nothing is sent again after this. */
  committed(): void {
    this.kept = undefined;
  }

  /** Stops pumping to the current sink (it failed); `attach` a new one. */
  detach(): void {
    this.sink = undefined;
    this.source.pause();
  }

  private forward(chunk: Buffer): void {
    if (this.kept !== undefined) {
      this.keptBytes += chunk.byteLength;
      if (this.keptBytes <= REPLAY_LIMIT_BYTES) this.kept.push(chunk);
      else this.kept = undefined;
    }
    const sink = this.sink;
    if (sink === undefined) return;
    if (!sink.write(chunk)) {
      this.source.pause();
      sink.once("drain", () => {
        if (this.sink === sink) this.source.resume();
      });
    }
  }
}
