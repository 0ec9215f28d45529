import type { BearerTokens } from "../../../lib/auth/bearer-tokens.js";

/**
 * The tokens each kind of call needs: inference (every call but health checks) and model
 * control, which has its own when --model-control-token-file is set (an inference token then
 * cannot load or unload models) and otherwise needs an inference token. Undefined: none.
 * (The tokens themselves, and the refusal's words: lib/auth/bearer-tokens.ts.)
 */
export interface AccessTokens {
  readonly inference: BearerTokens | undefined;
  readonly modelControl: BearerTokens | undefined;
}

/** The tokens a call needs, if any, and what they are called in a refusal. */
export function requiredTokens(
  access: AccessTokens,
  modelControl: boolean,
): { tokens: BearerTokens; purpose: string } | undefined {
  if (modelControl && access.modelControl !== undefined)
    return { tokens: access.modelControl, purpose: "model control" };
  return access.inference === undefined ? undefined : { tokens: access.inference, purpose: "" };
}

/** Kubernetes' gRPC probes and grpc_health_probe send no token: health needs none. */
export const isHealthCheck = (path: string): boolean => path.startsWith("/grpc.health.v1.Health/");
