import { createSecureContext } from "node:tls";
import type { Logger } from "pino";
import { errorMessage } from "../../lib/errors.js";
import { WatchedFiles } from "../../lib/watched-files.js";

/** A certificate (chain) and its key, PEM, as node:tls takes them. */
export interface Identity {
  readonly cert: Buffer;
  readonly key: Buffer;
}

/** How the relays reach the pods over TLS: the CA that signed their certificate, the name it carries. */
export interface UpstreamTls {
  readonly ca: Buffer;
  /** The name checked against the pods' certificate (default: the pod's IP). */
  readonly servername: string | undefined;
}

/** Something read from files and followed as they change (the last good value stays on a bad change). */
export interface Followed<T> {
  readonly current: T;
  onChange(listener: (value: T) => void): void;
  stop(): void;
}

/**
 * The serving certificate (the model's serving Secret), checked before use (node refuses a key
 * that does not match) and followed as the Secret rotates: new connections get the new one.
 */
export function followIdentity(
  files: { certFile: string; keyFile: string },
  options: { intervalMs: number; logger: Logger },
): Promise<Followed<Identity>> {
  return follow([files.certFile, files.keyFile], { ...options, what: "TLS certificate" }, ([cert, key]) => {
    createSecureContext({ cert: cert!, key: key! });
    return { cert: cert!, key: key! };
  });
}

/** The pods' CA, followed as it changes. */
export function followUpstreamCa(
  caFile: string,
  servername: string | undefined,
  options: { intervalMs: number; logger: Logger },
): Promise<Followed<UpstreamTls>> {
  return follow([caFile], { ...options, what: "upstream CA" }, ([ca]) => {
    createSecureContext({ ca: ca! });
    return { ca: ca!, servername };
  });
}

async function follow<T>(
  paths: readonly string[],
  options: { intervalMs: number; logger: Logger; what: string },
  read: (contents: readonly Buffer[]) => T,
): Promise<Followed<T>> {
  const listeners: ((value: T) => void)[] = [];
  let current: T | undefined;
  const watched = await WatchedFiles.watch(paths, options, (contents) => {
    const value = read(contents);
    current = value;
    for (const listener of listeners) listener(value);
  }).catch((error: unknown) => {
    throw new Error(`${options.what}: ${errorMessage(error)}`);
  });
  return {
    get current() {
      return current!;
    },
    onChange: (listener) => listeners.push(listener),
    stop: () => watched.stop(),
  };
}
