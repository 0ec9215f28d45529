/** What a StreamWriter needs of a server stream (duplex or server-streaming). */
interface WritableCall<Message> {
  write(message: Message): boolean;
  on(event: "drain", listener: () => void): unknown;
}

const WRITTEN = Promise.resolve();

/**
 * Writes the messages of a server stream's requests. A message is handed to the transport
 * at once (in the order produced); when its buffer is full, the writer waits for the next
 * drain. One drain listener and one abort listener serve every request of the stream, so
 * a write costs the same with one request pending or thousands.
 */
export class StreamWriter<Message> {
  private waiting: (() => void)[] = [];

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

  /** As `write`, but undefined when the transport can take more at once (nothing to wait for). */
  writeNow(message: Message): Promise<void> | undefined {
    if (this.signal.aborted || this.call.write(message)) return undefined;
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  private readonly wake = (): void => {
    for (const resume of this.waiting.splice(0)) resume();
  };
}
