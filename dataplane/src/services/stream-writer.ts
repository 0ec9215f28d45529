/** What a StreamWriter needs of a server stream (duplex or server-streaming). */
interface WritableCall<Message> {
  /** `written` runs once the message has left (grpc-js: written to the HTTP/2 stream, past its flow control). */
  write(message: Message, written?: () => void): boolean;
  on(event: "drain", listener: () => void): unknown;
}

const WRITTEN = Promise.resolve();

/**
 * Bytes of messages handed to the transport and not yet left past which a writer waits. grpc-js
 * says a stream is full at 16 messages whatever their size: a client that does not read would
 * leave 16 upstream replies of up to the message size limit each in memory, per call.
 */
export const MAX_QUEUED_BYTES = 1024 * 1024;

/**
 * Writes the messages of a server stream's requests. A message is handed to the transport
 * at once (in the order produced); when its buffer is full (or the messages not yet gone
 * whose size the caller gave pass MAX_QUEUED_BYTES), the writer waits until it has room. One
 * drain listener and one abort listener serve every request of the stream, so a write costs
 * the same with one request pending or thousands.
 */
export class StreamWriter<Message> {
  private waiting: (() => void)[] = [];
  /** Sizes of the messages handed to the transport and not yet written, in order (0: not given). */
  private readonly queuedSizes: number[] = [];
  private queuedBytes = 0;

  constructor(
    private readonly call: WritableCall<Message>,
    private readonly signal: AbortSignal,
  ) {
    call.on("drain", this.wake);
    signal.addEventListener("abort", this.wake, { once: true });
  }

  /** Resolves once the transport can take more (at once unless its buffer is full); never rejects. */
  write(message: Message): Promise<void> {
    return this.writeNow(message) ?? WRITTEN;
  }

  /**
   * As `write`, but undefined when the transport can take more at once (nothing to wait for).
   * `bytes`: the message's size, counted until it has left.
   */
  writeNow(message: Message, bytes = 0): Promise<void> | undefined {
    if (this.signal.aborted) return undefined;
    this.queuedSizes.push(bytes);
    this.queuedBytes += bytes;
    if (this.call.write(message, this.written) && this.queuedBytes <= MAX_QUEUED_BYTES) return undefined;
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  /** Messages leave in the order written: the oldest one's size is no longer queued. */
  private readonly written = (): void => {
    const bytes = this.queuedSizes.shift() ?? 0;
    this.queuedBytes -= bytes;
    if (bytes > 0 && this.queuedBytes <= MAX_QUEUED_BYTES) this.wake();
  };

  private readonly wake = (): void => {
    for (const resume of this.waiting.splice(0)) resume();
  };
}
