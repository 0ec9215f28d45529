import { ServerCredentials, type ServerInterceptor } from "@grpc/grpc-js";
import type { Logger } from "pino";
import { BearerTokens, bearerTokenInterceptor, isHealthCheck } from "./auth.js";
import { reloadingTlsCredentials, type TlsMaterial, type TlsOptions } from "./tls.js";
import { WatchedFiles } from "./watched-files.js";

export interface SecurityOptions {
  /** TLS (mTLS with a client CA); undefined serves plaintext HTTP/2 (h2c). */
  readonly tls: TlsOptions | undefined;
  /** A file of bearer tokens; undefined accepts every caller. */
  readonly authTokenFile: string | undefined;
  /** How often certificate and token files are reread. */
  readonly reloadIntervalMs: number;
}

export interface ServerSecurity {
  readonly credentials: ServerCredentials;
  /** To run after the metrics interceptor, so refused calls are counted too. */
  readonly interceptors: readonly ServerInterceptor[];
  /** The accepted bearer tokens (undefined: every caller), for the HTTP front door too. */
  readonly tokens: BearerTokens | undefined;
  /** The certificates (undefined: plaintext), for the HTTP front door too. */
  readonly tls: TlsMaterial | undefined;
  stop(): void;
}

/** The servers' transport security and authentication, each following its files. */
export async function serverSecurity(options: SecurityOptions, logger: Logger): Promise<ServerSecurity> {
  const stoppers: (() => void)[] = [];
  let credentials = ServerCredentials.createInsecure();
  let material: TlsMaterial | undefined;
  if (options.tls !== undefined) {
    const tls = await reloadingTlsCredentials(options.tls, logger);
    credentials = tls.credentials;
    material = tls.material;
    stoppers.push(tls.stop);
  }
  const interceptors: ServerInterceptor[] = [];
  let tokens: BearerTokens | undefined;
  if (options.authTokenFile !== undefined) {
    tokens = new BearerTokens();
    const file = options.authTokenFile;
    const watched = await WatchedFiles.watch(
      [file],
      { intervalMs: options.reloadIntervalMs, logger, what: "bearer tokens" },
      ([content]) => tokens!.load(content!.toString("utf8"), file),
    );
    stoppers.push(() => watched.stop());
    interceptors.push(bearerTokenInterceptor(tokens, isHealthCheck));
  }
  return { credentials, interceptors, tokens, tls: material, stop: () => stoppers.forEach((stop) => stop()) };
}
