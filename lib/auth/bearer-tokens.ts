import { createHash, timingSafeEqual } from "node:crypto";
import { parseTokenFile } from "../contract/layout.js";

/**
 * Bearer-token authentication, the one implementation the data plane (its gRPC server and
 * HTTP front door) and the activator share. Tokens come from a file (a mounted Secret: one
 * token per line, blank lines and lines starting with "#" ignored) and are replaced when it
 * changes. Comparison is in constant time, over SHA-256 digests so that lengths leak nothing
 * either, and every token is compared. Tokens are never logged.
 */
export class BearerTokens {
  private digests: readonly Buffer[] = [];

  /** Replaces the accepted tokens with those in a token file's contents. */
  load(content: string, source: string): void {
    const tokens = parseTokenFile(content);
    if (tokens.length === 0) throw new Error(`${source} holds no token (one per line)`);
    this.digests = tokens.map(digest);
  }

  accepts(token: string): boolean {
    const presented = digest(token);
    let match = false;
    for (const known of this.digests) match = timingSafeEqual(presented, known) || match;
    return match;
  }
}

const digest = (token: string): Buffer => createHash("sha256").update(token).digest();

/** Why a call's `authorization` values are refused (undefined: accepted), gRPC metadata or an HTTP header. */
export function authenticationFailure(
  values: readonly (string | Buffer)[],
  tokens: BearerTokens,
  carrier = "metadata",
  purpose = "",
): string | undefined {
  const token = purpose === "" ? "<token>" : `<${purpose} token>`;
  if (values.length === 0) return `missing credentials: send ${carrier} 'authorization: Bearer ${token}'`;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(String(values[0]));
  if (match === null) return `the authorization ${carrier} is not 'Bearer ${token}'`;
  if (tokens.accepts(match[1]!)) return undefined;
  return purpose === "" ? "the bearer token is not valid" : `the bearer token is not valid for ${purpose}`;
}
