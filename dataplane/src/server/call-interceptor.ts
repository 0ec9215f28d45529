import {
  ServerInterceptingCall,
  status,
  type Metadata,
  type ServerInterceptor,
  type ServerListener,
} from "@grpc/grpc-js";
import { VARIANT_HEADER } from "../../../lib/contract/dataplane.js";
import { isModelControlRpc } from "../../../lib/contract/model-control.js";
import { boundedDetail } from "../limits.js";
import type { GrpcServerMetrics } from "../metrics/grpc.js";
import { authenticationFailure } from "../../../lib/auth/bearer-tokens.js";
import { isHealthCheck, requiredTokens, type AccessTokens } from "./auth.js";

/**
 * What the gRPC server does around every call (inference, extensions, health, reflection),
 * in one grpc-js interceptor: one intercepting call per call where three layers made three.
 * Its effects, in order:
 * - bearer tokens (auth.ts): a call that needs them and carries none that fit is refused
 *   UNAUTHENTICATED when its metadata arrives, before its handler runs;
 * - the grpc_server_* metrics: every call started, every message received and sent, every
 *   call's end (a refusal too) with its code and time;
 * - the status's detail bounded last, whoever sent it (ours, grpc-health-check's,
 *   reflection's, the refusal): details echo what clients sent, and a `grpc-message` trailer
 *   past a stock client's metadata limit reaches the caller as RESOURCE_EXHAUSTED instead of
 *   the real code.
 */
/** A status as a server call sends it (grpc-js names the type but does not export it). */
type SentStatus = Parameters<ServerInterceptingCall["sendStatus"]>[0];

export function callInterceptor(
  metrics: GrpcServerMetrics,
  access: AccessTokens,
  /** --variant: every reply's initial metadata says it (VARIANT_HEADER). */
  variant?: string,
): ServerInterceptor {
  const tokensNeeded = access.inference !== undefined || access.modelControl !== undefined;
  return (method, call) => {
    const series = metrics.method(method);
    const startedAt = performance.now();
    series.started.add(1);
    let ended = false;
    const end = (code: status): void => {
      if (ended) return;
      ended = true;
      series.handled(code, (performance.now() - startedAt) / 1000);
    };
    const send = (outcome: SentStatus, next: (outcome: SentStatus) => void): void => {
      end(outcome.code);
      const details = boundedDetail(outcome.details);
      next(details === outcome.details ? outcome : { ...outcome, details });
    };
    const required =
      !tokensNeeded || isHealthCheck(method.path) ? undefined : requiredTokens(access, isModelControlRpc(method.path));
    const listener: ServerListener = {
      onReceiveMetadata: (metadata, forward) => {
        const failure =
          required === undefined
            ? undefined
            : authenticationFailure(metadata.get("authorization"), required.tokens, "metadata", required.purpose);
        if (failure === undefined) forward(metadata);
        else send({ code: status.UNAUTHENTICATED, details: failure }, (refusal) => call.sendStatus(refusal));
      },
      onReceiveMessage: (message, forward) => {
        series.received.add(1);
        forward(message);
      },
      // A call the client cancelled, or whose deadline grpc-js enforced itself, ends
      // without a status passing through here; grpc-js also reports every ended call as
      // cancelled, so only the first ending counts.
      onCancel: () => end(deadlinePassed(call.getDeadline()) ? status.DEADLINE_EXCEEDED : status.CANCELLED),
    };
    return new ServerInterceptingCall(call, {
      start: (next) => next(listener),
      sendMessage: (message, next) => {
        series.sent.add(1);
        next(message);
      },
      ...(variant !== undefined
        ? {
            sendMetadata: (metadata: Metadata, next: (metadata: Metadata) => void) => {
              metadata.set(VARIANT_HEADER, variant);
              next(metadata);
            },
          }
        : {}),
      sendStatus: send,
    });
  };
}

function deadlinePassed(deadline: Date | number): boolean {
  const at = deadline instanceof Date ? deadline.getTime() : deadline;
  return Number.isFinite(at) && Date.now() >= at;
}
