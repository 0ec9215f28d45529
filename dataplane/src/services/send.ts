/** What `send` needs of a server stream (duplex or server-streaming). */
interface WritableCall<Message> {
  write(message: Message): boolean;
  once(event: "drain", listener: () => void): unknown;
  off(event: "drain", listener: () => void): unknown;
}

/** Writes one message on a server stream, waiting for the transport to drain when its buffer is full. */
export function send<Message>(call: WritableCall<Message>, message: Message, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  if (call.write(message)) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      call.off("drain", done);
      signal.removeEventListener("abort", done);
      resolve();
    };
    call.once("drain", done);
    signal.addEventListener("abort", done, { once: true });
  });
}
