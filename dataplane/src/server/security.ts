import { ServerCredentials } from "@grpc/grpc-js";
import type { Logger } from "pino";
import { BearerTokens } from "../../../lib/auth/bearer-tokens.js";
import type { AccessTokens } from "./auth.js";
import { reloadingTlsCredentials, type TlsMaterial, type TlsOptions } from "./tls.js";
import { WatchedFiles } from "../../../lib/watched-files.js";

export interface SecurityOptions {
  /** TLS (mTLS with a client CA); undefined serves plaintext HTTP/2 (h2c). */
  readonly tls: TlsOptions | undefined;
  /** A file of bearer tokens; undefined accepts every caller. */
  readonly authTokenFile: string | undefined;
  /** A file of the bearer tokens model control needs instead; undefined: the authTokenFile's. */
  readonly modelControlTokenFile?: string | undefined;
  /** How often certificate and token files are reread. */
  readonly reloadIntervalMs: number;
}

export interface ServerSecurity {
  readonly credentials: ServerCredentials;
  /** The bearer tokens each kind of call needs: the gRPC server's (call-interceptor.ts) and the HTTP front door's. */
  readonly access: AccessTokens;
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
  const watchTokens = async (file: string | undefined, what: string): Promise<BearerTokens | undefined> => {
    if (file === undefined) return undefined;
    const tokens = new BearerTokens();
    const watched = await WatchedFiles.watch(
      [file],
      { intervalMs: options.reloadIntervalMs, logger, what },
      ([content]) => tokens.load(content!.toString("utf8"), file),
    );
    stoppers.push(() => watched.stop());
    return tokens;
  };
  const access: AccessTokens = {
    inference: await watchTokens(options.authTokenFile, "bearer tokens"),
    modelControl: await watchTokens(options.modelControlTokenFile, "model-control tokens"),
  };
  return { credentials, access, tls: material, stop: () => stoppers.forEach((stop) => stop()) };
}
