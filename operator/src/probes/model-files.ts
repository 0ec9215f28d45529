import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { errorMessage } from "../../../lib/errors.js";
import { formatStorageLocation, type RemoteLocation } from "../../../lib/storage/locations.js";
import { listUnder } from "../../../lib/storage/listing.js";
import { openObjectStore } from "../../../lib/storage/open.js";
import { StorageError, type ObjectStoreOptions } from "../../../lib/storage/store.js";
import { foundUnder, type ModelFilesFailure, type ModelFilesOutcome } from "../resources/storage.js";

/**
 * The operator's own look at a model location in object storage, with the credentials
 * the pods will use (the Secret's values): one bounded listing — a few thousand keys at
 * most, a few seconds at most — that says whether the store can be reached, the
 * credentials are accepted, the bucket exists, and something there looks like a model.
 * Answers are kept until the CR's generation, the Secret or the CA bundle changes, or a
 * while passes, so a resync does not list the bucket again.
 */

export interface ModelFilesRequest {
  /** Which CR asks (kind/namespace/name): one cached answer each. */
  readonly owner: string;
  /** What the answer depends on besides time: the CR's uid and generation, the Secret's and CA's resourceVersions. */
  readonly fingerprint: string;
  readonly location: RemoteLocation;
  /** A whole repository (models), or one model's folder (version folders). */
  readonly holds: "repository" | "model";
  /** The store's settings and the Secret's values (never logged, never in a message). */
  readonly options: Omit<ObjectStoreOptions, "caFile">;
  /** The CA bundle's PEM text, written to a private file for the check's duration. */
  readonly caPem?: string;
  /** Named in an access-denied message. */
  readonly secretName: string;
}

export interface ModelFilesChecking {
  check(request: ModelFilesRequest): Promise<ModelFilesOutcome>;
  /** When a cached answer runs out: the controller looks again then. */
  recheckAfterMs(outcome: ModelFilesOutcome): number;
}

/** The most keys one check reads: enough to find a model, bounded for a bucket of 100,000. */
const MAX_KEYS = 2000;
/** The longest one check waits for the store. */
export const CHECK_TIMEOUT_MS = 5_000;
/** A failed answer is looked at again sooner than a good one (the user is likely fixing it). */
const FAILURE_TTL_MS = 30_000;

const REASONS: Readonly<Record<string, ModelFilesFailure>> = {
  "access-denied": "AccessDenied",
  "no-such-bucket": "NoSuchBucket",
  unreachable: "EndpointUnreachable",
};

export class ModelFilesChecker implements ModelFilesChecking {
  private readonly answers = new Map<string, { fingerprint: string; until: number; outcome: ModelFilesOutcome }>();

  /** `ttlMs`: how long a good answer stands. */
  constructor(private readonly ttlMs: number) {}

  async check(request: ModelFilesRequest): Promise<ModelFilesOutcome> {
    const cached = this.answers.get(request.owner);
    if (cached !== undefined && cached.fingerprint === request.fingerprint && cached.until > Date.now()) {
      return cached.outcome;
    }
    const outcome = await listOnce(request);
    this.answers.set(request.owner, {
      fingerprint: request.fingerprint,
      until: Date.now() + this.recheckAfterMs(outcome),
      outcome,
    });
    return outcome;
  }

  recheckAfterMs(outcome: ModelFilesOutcome): number {
    return outcome.state === "Found" ? this.ttlMs : Math.min(this.ttlMs, FAILURE_TTL_MS);
  }
}

/** One listing of the location, bounded in keys and time, as an outcome. */
async function listOnce(request: ModelFilesRequest): Promise<ModelFilesOutcome> {
  const uri = formatStorageLocation(request.location);
  const caDir = request.caPem === undefined ? undefined : await mkdtemp(join(tmpdir(), "dynamo-kserve-ca-"));
  const timeout = new AbortController();
  const timer = setTimeout(() => timeout.abort(), CHECK_TIMEOUT_MS);
  try {
    let caFile: string | undefined;
    if (caDir !== undefined) {
      caFile = join(caDir, "ca.crt");
      await writeFile(caFile, request.caPem!, { mode: 0o600 });
    }
    const store = await openObjectStore(request.location, {
      ...request.options,
      requestTimeoutMs: CHECK_TIMEOUT_MS,
      ...(caFile !== undefined ? { caFile } : {}),
    });
    try {
      const listed = await withTimeout(
        listUnder(store, request.location, { signal: timeout.signal, limit: MAX_KEYS }),
        timeout.signal,
      );
      const keys = listed.map(({ path }) => path);
      const found = foundUnder(keys, request.holds);
      if (found.length > 0) return { state: "Found", location: uri, holds: request.holds, found };
      return {
        state: "Failed",
        reason: "NoModelsFound",
        message:
          request.holds === "repository"
            ? `${uri} holds nothing that looks like a model (no <model>/config.pbtxt, <model>/<version>/ or <model>.pbtxt among ${keys.length} keys)`
            : `${uri} holds no version folders (<version>/model.onnx, ...) among ${keys.length} keys`,
      };
    } finally {
      // Not awaited: a store that stopped answering must not hold the reconcile.
      void store.close().catch(() => undefined);
    }
  } catch (error) {
    return failure(error, uri, request, timeout.signal.aborted);
  } finally {
    clearTimeout(timer);
    if (caDir !== undefined) await rm(caDir, { recursive: true, force: true });
  }
}

/** `work`, or a rejection once `signal` aborts, whether or not the store heeds it. */
function withTimeout<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new Error("timed out"));
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

function failure(error: unknown, uri: string, request: ModelFilesRequest, timedOut: boolean): ModelFilesOutcome {
  if (timedOut) {
    return {
      state: "Failed",
      reason: "EndpointUnreachable",
      message: `${uri}: the store did not answer a listing within ${CHECK_TIMEOUT_MS / 1000} s`,
    };
  }
  const detail = withoutSecrets(errorMessage(error), request.options.secretValues ?? {});
  const reason = error instanceof StorageError ? (REASONS[error.kind] ?? "CheckFailed") : "CheckFailed";
  const what =
    reason === "AccessDenied"
      ? `access denied with the credentials of Secret ${request.secretName}`
      : reason === "NoSuchBucket"
        ? "the bucket (or container) does not exist"
        : reason === "EndpointUnreachable"
          ? "the endpoint cannot be reached"
          : "listing failed";
  return { state: "Failed", reason, message: `${uri}: ${what}: ${detail}` };
}

/** A store's message with any credential value it might echo cut out. */
export function withoutSecrets(message: string, secrets: Readonly<Record<string, string>>): string {
  return Object.values(secrets)
    .filter((value) => value.length >= 4)
    .reduce((text, value) => text.split(value).join("[redacted]"), message);
}
