import type { Logger } from "pino";
import type { BearerTokens } from "../../lib/auth/bearer-tokens.js";
import type { HoldResult, Holding } from "./holding.js";
import type { Identity, UpstreamTls } from "./tls.js";

/** What both relays (gRPC and HTTP/1.1) are given: the waiting room, the pods' port, the bounds, the tokens. */
export interface RelayOptions {
  readonly holding: Holding;
  readonly upstreamPort: number;
  readonly holdTimeoutMs: number;
  /** How long connecting to a pod may take; past it the pod never saw the request (it may go elsewhere). */
  readonly upstreamConnectTimeoutMs: number;
  readonly maxHeaderBytes: number;
  /** The accepted bearer tokens, read on every request (undefined: none needed). */
  readonly tokens: () => BearerTokens | undefined;
  /** The serving certificate (undefined: plaintext; h2c for gRPC). */
  readonly identity?: Identity;
  /** How to reach the pods over TLS, read for each new connection (undefined: plaintext). */
  readonly upstreamTls: () => UpstreamTls | undefined;
  /** Where a relay says why a pod could not be reached. */
  readonly logger: Logger;
}

/** The pause before a call a pod refused unread is sent again (the pod watch may lag). */
export const RETRY_PAUSE_MS = 100;

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Why a held request gets no pod, in words both relays send (undefined: its client left). */
export function holdRefusal(
  kind: Exclude<HoldResult["kind"], "pod">,
  holdTimeoutMs: number,
  byHoldTimeout: boolean,
): { kind: "full" | "deadline" | "stopping"; message: string } | undefined {
  switch (kind) {
    case "cancelled":
      return undefined;
    case "full":
      return { kind, message: "the model is scaled to zero and too many requests already wait for it to start" };
    case "stopping":
      return { kind, message: "the model is scaled to zero and its activator is shutting down" };
    case "deadline":
      return {
        kind,
        message: byHoldTimeout
          ? `the model is scaled to zero and no pod became ready within ${holdTimeoutMs / 1000} s (the activator's hold timeout); it is still starting`
          : "the model is scaled to zero and no pod became ready before the call's deadline; it is still starting",
      };
  }
}
