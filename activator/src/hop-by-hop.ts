import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";

/**
 * What a relay passes on of a header block. The activator stands in for the model's own pods,
 * so everything end to end crosses it, `authorization` included (the pods check the same
 * tokens): only connection-specific fields (RFC 9110 §7.6.1, RFC 9113 §8.2.2), those a
 * `connection` header names, and `date` (each hop writes its own) are dropped.
 */
const HOP_BY_HOP: ReadonlySet<string> = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authenticate",
  "proxy-authorization",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
  "http2-settings",
  "date",
]);

/** `headers` without hop-by-hop fields (and, unless `keepPseudo`, pseudo-headers). */
export function endToEndHeaders(headers: IncomingHttpHeaders, keepPseudo = false): OutgoingHttpHeaders {
  const named = new Set(
    String(headers["connection"] ?? "")
      .split(",")
      .map((name) => name.trim().toLowerCase())
      .filter((name) => name !== ""),
  );
  const kept: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || named.has(name)) continue;
    if (name.startsWith(":") && !keepPseudo) continue;
    kept[name] = value;
  }
  return kept;
}
