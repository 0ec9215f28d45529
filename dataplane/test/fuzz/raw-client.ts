import { Client, credentials, Metadata, status, type ServiceError } from "@grpc/grpc-js";

/**
 * A gRPC client that sends bytes as they are (no serializer), so a test can put any
 * message, however broken, on the wire of a real method, and see exactly what comes back.
 */

export interface RawOutcome {
  readonly code: status;
  readonly details: string;
  /** Every response message, undecoded. */
  readonly responses: readonly Buffer[];
}

const asIs = (value: Buffer): Buffer => value;

export class RawClient {
  private readonly client: Client;

  constructor(address: string) {
    this.client = new Client(address, credentials.createInsecure(), { "grpc.max_receive_message_length": -1 });
  }

  unary(path: string, message: Buffer, deadlineMs: number): Promise<RawOutcome> {
    return new Promise((resolve) => {
      this.client.makeUnaryRequest(
        path,
        asIs,
        asIs,
        message,
        new Metadata(),
        { deadline: Date.now() + deadlineMs },
        (error: ServiceError | null, response?: Buffer) =>
          resolve(
            error === null
              ? { code: status.OK, details: "", responses: response === undefined ? [] : [response] }
              : { code: error.code, details: error.details, responses: [] },
          ),
      );
    });
  }

  /** Server-streaming (one message in) or bidirectional (every message, then half-close). */
  stream(path: string, messages: readonly Buffer[], bidi: boolean, deadlineMs: number): Promise<RawOutcome> {
    const options = { deadline: Date.now() + deadlineMs };
    let call;
    if (bidi) {
      const duplex = this.client.makeBidiStreamRequest(path, asIs, asIs, new Metadata(), options);
      for (const message of messages) duplex.write(message);
      duplex.end();
      call = duplex;
    } else {
      call = this.client.makeServerStreamRequest(path, asIs, asIs, messages[0]!, new Metadata(), options);
    }
    const responses: Buffer[] = [];
    return new Promise<RawOutcome>((resolve) => {
      call.on("data", (response: Buffer) => responses.push(response));
      call.on("error", () => undefined);
      call.on("status", ({ code, details }: { code: status; details: string }) =>
        resolve({ code, details, responses }),
      );
    });
  }

  close(): void {
    this.client.close();
  }
}
