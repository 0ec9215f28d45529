import type { Logger } from "pino";
import type { ModelConfig } from "../../../proto/gen/ts/model_config.js";
import type { Engine, EngineLoad, ModelDependencies } from "../engines/engine.js";
import type { ModelFiles } from "../../../lib/model-repository/sources.js";
import {
  DataPlaneError,
  errorMessage,
  failedPrecondition,
  internal,
  invalidArgument,
  notFound,
  unavailable,
  type ErrorKind,
} from "../../../lib/errors.js";
import { applyConfigOverride } from "../../../lib/model-repository/override.js";
import { ConfigError, UnsupportedFeature, configText } from "../../../lib/model-repository/config.js";
import { InFlight } from "./in-flight.js";
import { Holds } from "../../../lib/holds.js";
import { readModelFolder, scanModelSources, type ModelSource } from "../../../lib/model-repository/sources.js";
import {
  completeEnsembles,
  parseCandidate,
  type Candidate,
  type CandidateOptions,
} from "../../../lib/model-repository/candidates.js";
import { toModelSpec, type ModelSpec } from "../../../lib/model-repository/spec.js";
import { VersionStatistics } from "./statistics.js";
import { Scheduler, type RequestScheduler } from "../scheduling/scheduler.js";
import { SequenceScheduler } from "../scheduling/sequence.js";
import { SEQUENCE_WORKERS_REASON } from "../../../lib/model-repository/sequence-batching.js";
import { servedVersions } from "../../../lib/model-repository/versions.js";
import { warmUp } from "../scheduling/warmup.js";

/**
 * Triton's model control modes: `none` loads everything at start and never changes,
 * `poll` also follows changes on disk, `explicit` loads only what it is told to
 * (--load-model, RepositoryModelLoad) and lets clients unload.
 */
export type ModelControlMode = "none" | "poll" | "explicit";

export type ModelState = "READY" | "UNAVAILABLE";

/** A model that can take requests: its spec, engine and the versions it serves. */
export interface LiveModel {
  readonly spec: ModelSpec;
  readonly engine: Engine;
  readonly versions: readonly string[];
  readonly source: string;
  /** The requests its engine is running: a replaced or unloaded engine is closed once they are done. */
  readonly inFlight: InFlight;
  /** When this engine was built (ms since the epoch), e.g. OpenAI's model `created`. */
  readonly loadedAt: number;
  /** The model folder its engine reads (a snapshot in the model cache for object storage's models). */
  readonly folder?: string;
  /** Its engine is one the data plane schedules (EngineDescription.scheduled): `priority` and `timeout` are the scheduler's. */
  readonly scheduled: boolean;
  /**
   * One scheduler per served version, for a scheduled model whose config asks for
   * scheduling (dynamic_batching, instance_group or model_warmup); absent, requests go
   * straight to the engine.
   */
  readonly schedulers?: ReadonlyMap<string, RequestScheduler>;
}

/** The (model, version) a request names, with the statistics of that version. */
export interface ResolvedModel {
  readonly model: LiveModel;
  readonly version: string;
  readonly statistics: VersionStatistics;
}

/** A resolved model held until `release`, so its engine stays open. */
export interface ModelLease extends ResolvedModel {
  /** Ends the hold; call exactly once. */
  release(): void;
}

interface ModelRecord {
  readonly name: string;
  state: ModelState;
  reason: string;
  live: LiveModel | undefined;
  /** Of the source last loaded (successfully or not), to skip unchanged sources. */
  fingerprint: string | undefined;
  /** Why the model's files could not be brought from object storage, while that lasts. */
  downloadFailure?: string;
  readonly statistics: Map<string, VersionStatistics>;
}

export interface IndexEntry {
  readonly name: string;
  readonly version: string;
  readonly state: ModelState | "";
  readonly reason: string;
}

/**
 * Model repositories in object storage, mirrored into local folders the registry scans
 * (dataplane/src/storage/model-storage.ts): synced before a scan, one model before its load.
 */
export interface ModelFilesStorage {
  /** The repositories' local folders whose model folders are symlinks to immutable snapshots. */
  readonly views: ReadonlySet<string>;
  /** Single-file-configured models' own files folders, by model (--model-files; a remote one's, in a view). */
  readonly modelFiles: ReadonlyMap<string, string>;
  /** Brings every changed model of the remote repositories; why each that could not be brought failed, by model. */
  syncAll(): Promise<ReadonlyMap<string, string>>;
  /** Brings one model's files; throws (a StorageError) why it cannot. */
  syncModel(name: string): Promise<void>;
  /** The model names the remote repositories list, downloaded or not. */
  listedNames(): Promise<readonly string[]>;
  /** The local folder of a load request's model_path, checked against the allowed locations and synced. */
  modelPathFolder(path: string): Promise<string>;
}

/** Where the models are, how they load, and (CandidateOptions) how their configs are completed. */
export interface RegistryOptions extends CandidateOptions {
  readonly repositories: readonly string[];
  readonly configFiles: readonly string[];
  /** Repositories in object storage (their views are among `repositories`); absent: local folders only. */
  readonly storage?: ModelFilesStorage;
  /** Where single-file configs find their version folders: `<root>/<model>/<version>/`. */
  readonly modelFilesRoot?: string;
  readonly controlMode: ModelControlMode;
  /** With explicit control: the models to load at start ("*" for all). */
  readonly startupModels: readonly string[];
  readonly createEngine: (spec: ModelSpec, source: string, files?: ModelFiles) => Engine;
  /** Whether the data plane schedules the engine of a model (EngineDescription.scheduled); absent: none. */
  readonly schedules?: (spec: ModelSpec, source: string) => boolean;
  /** --grpc-workers: above 1, a sequence model is refused (a sequence's requests could reach any worker). */
  readonly grpcWorkers?: number;
  /** How long a replaced or unloaded engine's running requests may take before it is closed anyway. */
  readonly retireGraceMs: number;
  /** How long an engine's start (a Python model's initialize) may take; 0 or undefined: no bound. */
  readonly loadTimeoutMs?: number;
  readonly logger: Logger;
}

/**
 * The models this data plane serves. Loads them from the repository, keeps the last
 * good configuration of each when an update is broken, and answers which engine serves
 * a (model, version). The changes of one model go through its own queue, so a poll and a
 * load RPC never interleave on it, while a model that is slow to load (an initialize that
 * never returns) holds up no other model's; a load is bounded by the load timeout, and
 * close() stops those in progress.
 */
export class ModelRegistry implements ModelDependencies {
  private readonly records = new Map<string, ModelRecord>();
  /** Parsed sources by path, reused while the source's fingerprint is unchanged (polls reparse nothing). */
  private readonly parsed = new Map<string, Candidate>();
  /** The scan of the repository under way, which every caller meanwhile shares, and when it started. */
  private scanning: { readonly candidates: Promise<Candidate[]>; readonly started: number } | undefined;
  /** Counts scans and syncs, so a caller that synced waits for a scan that started after. */
  private clock = 0;
  /** Model folders of changes queued or under way (their snapshots must stay). */
  private readonly pendingFolders = new Holds<string>();
  /** Engines retired and not yet closed. */
  private readonly retiringModels = new Set<LiveModel>();
  /** Pairs of sources defining the same model that were already logged. */
  private readonly shadowed = new Set<string>();
  /** Each model's queue of changes: the last one queued, while any is pending. */
  private readonly queues = new Map<string, Promise<unknown>>();
  /** Stops the engine starts and warmups in progress (close()). */
  private readonly loadsInProgress = new Set<(why: string) => void>();
  private isClosed = false;
  /** Set once start() has loaded, or failed to load, every model asked for at start. */
  private startedUp = false;
  private readonly listeners: (() => void)[] = [];
  /** Engines replaced or unloaded whose running requests are finishing before they are closed. */
  private readonly retiring = new Set<Promise<void>>();
  /** Resolved by close(): retiring engines stop waiting for their requests. */
  private closing: () => void = () => undefined;
  private readonly closed = new Promise<void>((resolve) => (this.closing = resolve));
  /** The names of the models served now that pass requests through undecoded, by the entries they do it on. */
  private readonly passingThrough: Readonly<Record<"unary" | "stream", Set<string>>> = {
    unary: new Set(),
    stream: new Set(),
  };

  constructor(private readonly options: RegistryOptions) {}

  /**
   * The models whose requests on a unary entry (ModelInfer) or a stream (ModelStreamInfer,
   * ModelInferStream) are passed through undecoded (inference/forward.ts): served by an
   * engine that forwards (Engine.forward) without declared tensors, so nothing here checks
   * them, and where the upstream's replies are what the entry sends — on a unary entry a
   * model that is not decoupled, on a stream a decoupled one (whose final flags are the
   * upstream's). Updated as models are loaded and unloaded; read by the request
   * deserializers, one lookup per request.
   */
  passThroughNames(requestType: "unary" | "stream"): ReadonlySet<string> {
    return this.passingThrough[requestType];
  }

  /** Calls `listener` whenever a model becomes ready or stops being ready, and when start() is done. */
  onChange(listener: () => void): void {
    this.listeners.push(listener);
  }

  private notifyChange(): void {
    this.listeners.forEach((listener) => listener());
  }

  get controlMode(): ModelControlMode {
    return this.options.controlMode;
  }

  /** Loads the models the control mode asks for at start; serving() is false until it is done. */
  async start(): Promise<void> {
    await this.loadAtStart();
    this.startedUp = true;
    this.notifyChange();
  }

  private async loadAtStart(): Promise<void> {
    const { controlMode, startupModels } = this.options;
    if (controlMode !== "explicit" || startupModels.includes("*")) {
      await this.sync();
      return;
    }
    await Promise.all(
      startupModels.map((name) =>
        this.load(name).catch((error: unknown) =>
          this.options.logger.error({ model: name, err: errorMessage(error) }, "model failed to load at start"),
        ),
      ),
    );
  }

  /**
   * Whether the data plane is ready (ServerReady, the readiness probes): its start-up loads are
   * done, each model READY or UNAVAILABLE (Triton too serves nothing before they are), and one
   * model at least is ready. A pod ready with a model still loading would be sent that model's
   * requests, which it could only refuse; a load that hangs is ended by the load timeout. Not
   * Triton's strict readiness, which a model UNAVAILABLE after a failed load would end.
   */
  serving(): boolean {
    return this.startedUp && this.readyCount() > 0;
  }

  /** Brings every model in line with the repository, and resolves once each change is done. */
  async sync(): Promise<void> {
    await Promise.all(await this.poll());
  }

  /**
   * Poll mode's tick: starts bringing every model in line with the repository and resolves
   * once the changes are queued (each model's change, done in its own queue); a model
   * whose last change is still running is left for a later poll.
   */
  async poll(): Promise<Promise<void>[]> {
    const failures = (await this.options.storage?.syncAll()) ?? new Map<string, string>();
    const candidates = await this.candidates(++this.clock);
    this.noteDownloadFailures(failures);
    const names = new Set([...candidates.map((candidate) => candidate.name), ...failures.keys()]);
    const changes: Promise<void>[] = [];
    for (const candidate of candidates) {
      if (this.queues.has(candidate.name)) continue;
      if (this.records.get(candidate.name)?.fingerprint === candidate.source.fingerprint) continue;
      // From now on its snapshot stays, whatever the next sync brings, until the change is done.
      const release = this.holdFolder(candidate.source.folder);
      changes.push(
        this.serialize(candidate.name, () => this.apply(candidate))
          .catch(() => undefined)
          .finally(release),
      );
    }
    for (const [name, record] of this.records) {
      if (names.has(name) || this.queues.has(name)) continue;
      const removed = async (): Promise<void> => {
        await this.retire(record, "removed from the model repository");
        this.records.delete(name);
      };
      changes.push(this.serialize(name, removed).catch(() => undefined));
    }
    return changes;
  }

  /**
   * Loads (or reloads) one model from the repository, with `overrideJson` (a load request's
   * config override, see lib/model-repository/override.ts) applied to its config if given.
   * Throws if the model cannot be served; a model already serving keeps its previous
   * configuration then. Errors read as Triton's, which clients match.
   */
  load(name: string, overrideJson?: string, modelPath?: string): Promise<void> {
    return this.serialize(name, async () => {
      const found =
        modelPath === undefined ? await this.repositoryCandidate(name) : await this.candidateAt(name, modelPath);
      if (found === undefined) {
        // Triton's code and words; a load request can never add a model the repository lacks.
        throw internal(
          `failed to load '${name}', failed to poll from model repository: '${name}' is not in the model repository`,
        );
      }
      try {
        await this.apply(overrideJson === undefined ? found : overriddenCandidate(found, overrideJson));
      } catch (error) {
        // Triton's words. A load stopped by shutdown or its timeout is UNAVAILABLE (try again,
        // elsewhere); anything else is what the config or model asks for: INVALID_ARGUMENT.
        const message = `load failed for model '${name}': ${errorMessage(error)}`;
        throw error instanceof LoadStopped ? unavailable(message) : invalidArgument(message);
      }
    });
  }

  unload(name: string): Promise<void> {
    return this.serialize(name, async () => {
      const record = this.records.get(name);
      // As Triton: unloading what is not loaded (or not in the repository) is done already.
      if (record === undefined || record.live === undefined) return;
      await this.retire(record, "unloaded");
      record.fingerprint = undefined;
    });
  }

  /**
   * The model's candidate in the repositories, its files brought from object storage first:
   * a download that fails keeps the last good model serving, and fails the load saying why.
   */
  private async repositoryCandidate(name: string): Promise<Candidate | undefined> {
    const { storage } = this.options;
    if (storage !== undefined) {
      const record = this.records.get(name);
      try {
        await storage.syncModel(name);
        if (record !== undefined) record.downloadFailure = undefined;
      } catch (error) {
        const message = errorMessage(error);
        if (record !== undefined) record.downloadFailure = message;
        else this.records.set(name, { ...newRecord(name), downloadFailure: message });
        throw new DataPlaneError(
          downloadErrorKind(error),
          `load failed for model '${name}': download failed: ${message}`,
        );
      }
    }
    const candidates = await this.candidates(++this.clock);
    return candidates.find((candidate) => candidate.name === name);
  }

  /**
   * A load request's model_path: the model folder there (brought from object storage if it
   * is a remote location), served as `name` whatever the folder is called (its config's
   * `name`, if set, must be `name`, as in a repository).
   */
  private async candidateAt(name: string, modelPath: string): Promise<Candidate> {
    const { storage } = this.options;
    if (storage === undefined) {
      throw invalidArgument(
        `RepositoryModelLoad parameter 'model_path': this server loads models from its repositories only`,
      );
    }
    let folder: string;
    try {
      folder = await storage.modelPathFolder(modelPath);
    } catch (error) {
      if (error instanceof DataPlaneError) throw error;
      throw new DataPlaneError(
        downloadErrorKind(error),
        `load failed for model '${name}': download failed: ${errorMessage(error)}`,
      );
    }
    const source = await readModelFolder(folder, name).catch((error: unknown) => {
      throw invalidArgument(
        `load failed for model '${name}': model_path '${modelPath}' cannot be read: ${errorMessage(error)}`,
      );
    });
    return parseCandidate(source, this.options);
  }

  /** Records why models' files could not be brought (and forgets it for the others). */
  private noteDownloadFailures(failures: ReadonlyMap<string, string>): void {
    for (const [name, failure] of failures) {
      const record = this.records.get(name);
      if (record !== undefined) record.downloadFailure = failure;
      else this.records.set(name, { ...newRecord(name), downloadFailure: failure });
    }
    for (const [name, record] of this.records) if (!failures.has(name)) record.downloadFailure = undefined;
  }

  /**
   * The model folders engines read or are about to: live models', retired ones' still
   * finishing requests, and those of changes queued or loading. The model cache never
   * deletes these snapshots.
   */
  foldersInUse(): Set<string> {
    const folders = new Set(this.pendingFolders.held());
    for (const record of this.records.values()) if (record.live?.folder !== undefined) folders.add(record.live.folder);
    for (const live of this.retiringModels) if (live.folder !== undefined) folders.add(live.folder);
    return folders;
  }

  async dependency(name: string): Promise<{ readonly spec: ModelSpec } | { readonly reason: string }> {
    await this.queues.get(name);
    let loadFailure: string | undefined;
    if (this.records.get(name)?.live === undefined && this.options.controlMode === "explicit") {
      await this.load(name).catch((error: unknown) => (loadFailure = errorMessage(error)));
    }
    const record = this.records.get(name);
    if (record?.live !== undefined) return { spec: record.live.spec };
    return { reason: loadFailure ?? (record === undefined ? "" : reasonOf(record)) };
  }

  /** Checks that explicit load/unload requests are allowed in this control mode. */
  assertExplicitControl(action: string): void {
    if (this.options.controlMode !== "explicit") {
      throw failedPrecondition(
        `${action} needs --model-control-mode=explicit; this data plane runs in '${this.options.controlMode}' mode`,
      );
    }
  }

  /**
   * The model and version a request names; an empty version means the latest served, and so
   * does "0": MAX's clients send it for "the model's one version", and it can name no Triton
   * version (version folders are positive numbers; Triton ignores names starting with 0).
   */
  resolve(name: string, requested: string): ResolvedModel {
    const version = requested === "0" ? "" : requested;
    const record = this.records.get(name);
    // Triton's words ("Request for unknown model: ..."), which its clients match.
    if (record === undefined) throw notFound(`Request for unknown model: '${name}' is not found`);
    const model = record.live;
    if (model === undefined) {
      throw unavailable(
        `Request for unknown model: '${name}' has no available versions (not ready: ${reasonOf(record) || "not loaded"})`,
      );
    }
    const chosen = version || (model.versions[model.versions.length - 1] as string);
    if (!model.versions.includes(chosen)) {
      throw notFound(
        `Request for unknown model: '${name}' version ${version} is not found (serving: ${model.versions.join(", ")})`,
      );
    }
    return { model, version: chosen, statistics: statisticsOf(record, chosen) };
  }

  /**
   * Holds a resolved model's engine open until `release`: a reload or unload meanwhile
   * serves new requests elsewhere (or refuses them) and closes this engine only after the
   * request is done. Call it right after `resolve`, with nothing awaited in between.
   */
  hold(resolved: ResolvedModel): ModelLease {
    const { inFlight } = resolved.model;
    inFlight.begin();
    return { ...resolved, release: () => inFlight.end() };
  }

  isReady(name: string, version: string): boolean {
    const model = this.records.get(name)?.live;
    return model !== undefined && engineReady(model) && (version === "" || model.versions.includes(version));
  }

  /** Every model the registry has tried to load (ready or not). */
  modelNames(): string[] {
    return [...this.records.keys()];
  }

  /** The models ready to serve now. */
  readyModels(): LiveModel[] {
    const ready: LiveModel[] = [];
    for (const record of this.records.values())
      if (record.live !== undefined && engineReady(record.live)) ready.push(record.live);
    return ready;
  }

  /**
   * Each loaded model's load: its schedulers' queued and executing requests for a model
   * the data plane schedules (a replaced engine's still finishing its queue included), else
   * its engine's; an engine that says nothing is running what the model has in flight.
   */
  loads(): { name: string; load: EngineLoad }[] {
    const rows: { name: string; load: EngineLoad }[] = [];
    for (const { name, live } of this.records.values()) {
      if (live === undefined) continue;
      const load = live.engine.load?.() ?? { waiting: 0, running: live.inFlight.size };
      if (live.schedulers === undefined) {
        rows.push({ name, load });
        continue;
      }
      let waiting = 0;
      let running = 0;
      for (const { scheduler } of this.schedulersOf(name, live)) {
        waiting += scheduler.queued;
        running += scheduler.running;
      }
      rows.push({ name, load: { ...load, waiting, running } });
    }
    return rows;
  }

  /**
   * Requests queued and not yet executing, per served (model, version), a replaced engine's
   * queue included: 0 for a model without a scheduler.
   */
  pendingRequests(): { name: string; version: string; pending: number }[] {
    const rows: { name: string; version: string; pending: number }[] = [];
    for (const { name, live } of this.records.values()) {
      if (live === undefined) continue;
      const pending = new Map(live.versions.map((version) => [version, 0]));
      for (const { version, scheduler } of this.schedulersOf(name, live)) {
        if (pending.has(version)) pending.set(version, pending.get(version)! + scheduler.queued);
      }
      for (const [version, count] of pending) rows.push({ name, version, pending: count });
    }
    return rows;
  }

  /** The schedulers of a model's live engine, and of its engines replaced and not yet closed. */
  private schedulersOf(name: string, live: LiveModel): { version: string; scheduler: RequestScheduler }[] {
    const found: { version: string; scheduler: RequestScheduler }[] = [];
    for (const model of [live, ...this.retiringModels]) {
      if (model !== live && model.spec.name !== name) continue;
      for (const [version, scheduler] of model.schedulers ?? []) found.push({ version, scheduler });
    }
    return found;
  }

  readyCount(): number {
    let count = 0;
    for (const record of this.records.values()) if (record.live !== undefined && engineReady(record.live)) count++;
    return count;
  }

  /** Statistics of every served (model, version), optionally narrowed to one model/version. */
  statistics(name: string, version: string): { name: string; version: string; statistics: VersionStatistics }[] {
    if (name !== "") this.resolve(name, version);
    const rows: { name: string; version: string; statistics: VersionStatistics }[] = [];
    for (const record of this.records.values()) {
      if (record.live === undefined || (name !== "" && record.name !== name)) continue;
      for (const served of record.live.versions) {
        if (version !== "" && served !== version) continue;
        const { statistics } = this.resolve(record.name, served);
        rows.push({ name: record.name, version: served, statistics });
      }
    }
    return rows;
  }

  /** Every model in the repository or loaded, with its state, as RepositoryIndex reports it. */
  async index(readyOnly: boolean): Promise<IndexEntry[]> {
    const candidates = await this.candidates().catch(() => [] as Candidate[]);
    // Explicit mode lists what object storage holds, downloaded or not (the other modes have synced it all).
    const listed =
      this.options.controlMode === "explicit" && !readyOnly
        ? await (this.options.storage?.listedNames() ?? Promise.resolve([]))
        : [];
    const names = new Set([...candidates.map((candidate) => candidate.name), ...listed, ...this.records.keys()]);
    const entries: IndexEntry[] = [];
    for (const name of [...names].sort()) {
      const record = this.records.get(name);
      if (record?.live !== undefined) {
        for (const version of record.live.versions) {
          entries.push({ name, version, state: "READY", reason: reasonOf(record) });
        }
      } else if (!readyOnly) {
        entries.push({ name, version: "", state: record?.state ?? "", reason: record ? reasonOf(record) : "" });
      }
    }
    return entries;
  }

  /**
   * Closes every engine, those still finishing requests after a reload or unload included
   * (the server has drained or cut its calls by now: nothing is waited for).
   */
  async close(): Promise<void> {
    this.closing();
    this.isClosed = true;
    // Loads in progress stop (a Python model's processes are killed), so their queues settle.
    for (const stop of this.loadsInProgress) stop(STOPPED_LOADING);
    await Promise.all([...this.queues.values()].map((queued) => queued.catch(() => undefined)));
    for (const record of this.records.values()) await this.retire(record, "server shutting down");
    await Promise.all(this.retiring);
  }

  /** Runs `task` once the model's earlier changes are done; refused once the registry is closed. */
  private serialize<T>(name: string, task: () => Promise<T>): Promise<T> {
    if (this.isClosed) return Promise.reject(new LoadStopped(`model '${name}': the server is shutting down`));
    const run = (this.queues.get(name) ?? Promise.resolve()).then(task, task).finally(() => this.notifyChange());
    const settled = run.catch(() => undefined);
    this.queues.set(name, settled);
    void settled.then(() => {
      if (this.queues.get(name) === settled) this.queues.delete(name);
    });
    return run;
  }

  /**
   * Starts an engine (a Python model's processes and their initialize) within the load
   * timeout. A start that runs out of time, or that close() stops, fails the load and its
   * engine is closed (the processes killed), so nothing is left starting.
   */
  private async startEngine(name: string, engine: Engine): Promise<void> {
    if (engine.start === undefined) return;
    const start = engine.start.bind(engine);
    await this.withinLoadTimeout(name, engine, "did not load", () => start());
  }

  /**
   * Runs a step of a model's load (its engine's start, its warmup) within what is left of
   * the load timeout counted from `loadStarted` (ms since the epoch); `signal` is aborted when
   * the step is stopped (timeout, close()), and a step that fails or is stopped closes the engine.
   */
  private async withinLoadTimeout(
    name: string,
    engine: Engine,
    late: string,
    step: (signal: AbortSignal) => Promise<void>,
    loadStarted = Date.now(),
  ): Promise<void> {
    const abort = new AbortController();
    // A load queued behind one close() stopped: nothing starts once the registry is closed.
    const running = this.isClosed
      ? Promise.reject(new LoadStopped(`model '${name}' ${STOPPED_LOADING}`))
      : step(abort.signal);
    running.catch(() => undefined); // its outcome is read below, or no longer wanted
    const timeoutMs = this.options.loadTimeoutMs ?? 0;
    let timer: NodeJS.Timeout | undefined;
    let stop: (why: string) => void = () => undefined;
    const stopped = new Promise<never>((_, reject) => {
      stop = (why) => {
        const error = new LoadStopped(`model '${name}' ${why}`);
        abort.abort(error);
        reject(error);
      };
      if (timeoutMs > 0) {
        const seconds = timeoutMs / 1000;
        const left = Math.max(0, loadStarted + timeoutMs - Date.now());
        timer = setTimeout(() => stop(`${late} within ${seconds} s (--model-load-timeout-secs)`), left);
      }
    });
    this.loadsInProgress.add(stop);
    try {
      await Promise.race([running, stopped]);
    } catch (error) {
      await engine.close().catch(() => undefined);
      throw error;
    } finally {
      clearTimeout(timer);
      this.loadsInProgress.delete(stop);
    }
  }

  /**
   * The repository's models, read by one scan for every caller that asks while it runs:
   * loads run in parallel (one queue per model), and each scan may run Python models'
   * auto_complete_config in processes of their own, so N loads at once must not mean N scans.
   */
  private candidates(notBefore = 0): Promise<Candidate[]> {
    const current = this.scanning;
    if (current !== undefined && current.started >= notBefore) return current.candidates;
    // One that started before the caller's sync may miss what it brought: a new scan follows it.
    const previous = current?.candidates.catch(() => undefined) ?? Promise.resolve();
    const candidates: Promise<Candidate[]> = previous
      .then(() => this.scan())
      .finally(() => {
        if (this.scanning?.candidates === candidates) this.scanning = undefined;
      });
    this.scanning = { candidates, started: ++this.clock };
    return candidates;
  }

  private async scan(): Promise<Candidate[]> {
    const { storage } = this.options;
    const sources = await scanModelSources(this.options.repositories, this.options.configFiles, {
      ...(this.options.modelFilesRoot !== undefined ? { modelFilesRoot: this.options.modelFilesRoot } : {}),
      ...(storage !== undefined ? { modelFiles: storage.modelFiles, snapshotViews: storage.views } : {}),
    });
    const byName = new Map<string, Candidate>();
    for (const source of sources) {
      const cached = this.parsed.get(source.path);
      const candidate =
        cached?.source.fingerprint === source.fingerprint
          ? { ...cached, source }
          : await parseCandidate(source, this.options);
      this.parsed.set(source.path, candidate);
      const twin = byName.get(candidate.name);
      if (twin !== undefined) {
        // Told once, not on every poll: a ConfigMap of configs placed before a repository
        // (a DynamoKserveRepository with both) overrides it this way on purpose.
        const pair = `${twin.source.path}\n${source.path}`;
        if (!this.shadowed.has(pair)) {
          this.shadowed.add(pair);
          this.options.logger.warn(
            { model: candidate.name, first: twin.source.path, second: source.path },
            "two sources define the same model; the first (in repository order) is served",
          );
        }
        continue;
      }
      byName.set(candidate.name, candidate);
    }
    const present = new Set(sources.map((source) => source.path));
    for (const path of this.parsed.keys()) if (!present.has(path)) this.parsed.delete(path);
    return completeEnsembles([...byName.values()], this.options.forwardUnsupported);
  }

  /** Loads a candidate; on failure keeps the last good model (if any) and rethrows. */
  private async apply(candidate: Candidate): Promise<void> {
    const { logger } = this.options;
    let record = this.records.get(candidate.name);
    if (record === undefined) {
      record = newRecord(candidate.name);
      this.records.set(candidate.name, record);
    }
    record.fingerprint = candidate.source.fingerprint;
    const release = this.holdFolder(candidate.source.folder);
    try {
      const live = this.build(candidate, record);
      if (candidate.forwardedBecause !== undefined) {
        // Once per load: which models --forward-unsupported sends away, and why.
        const upstream = live.spec.parameters["upstream"];
        logger.info(
          { model: candidate.name, upstream, reason: candidate.forwardedBecause },
          `model '${candidate.name}' forwarded to ${upstream}: ${candidate.forwardedBecause}`,
        );
      }
      const loadStarted = Date.now();
      // As Triton: a model is READY once its engine has loaded it (e.g. a Python model's
      // initialize ran); one that fails to load leaves the last good one serving.
      await this.startEngine(candidate.name, live.engine);
      // As Triton: the model_warmup samples run on every instance before the model is READY,
      // within what the engine's start left of the load timeout.
      await this.withinLoadTimeout(
        candidate.name,
        live.engine,
        "did not load (model_warmup still running)",
        (signal) => warmUp({ ...live, statistics: (version) => statisticsOf(record, version) }, signal),
        loadStarted,
      );
      const previous = record.live;
      record.live = live;
      this.notePassThrough(record.name, live);
      record.state = "READY";
      record.reason = "";
      if (previous !== undefined) this.closeWhenIdle(previous);
      logger.info(
        { model: candidate.name, versions: live.versions, backend: live.spec.backend },
        previous ? "model reloaded" : "model loaded",
      );
    } catch (error) {
      const message = errorMessage(error);
      if (record.live !== undefined) {
        record.reason = `configuration update rejected, still serving the previous one: ${message}`;
        logger.error(
          { model: candidate.name, err: message },
          "model update rejected; keeping the last good configuration",
        );
      } else {
        record.state = "UNAVAILABLE";
        record.reason = message;
        logger.error({ model: candidate.name, err: message }, "model failed to load");
      }
      throw error;
    } finally {
      release();
    }
  }

  /** Keeps passThroughNames in step with the model served under `name` (none: unloaded). */
  private notePassThrough(name: string, live: LiveModel | undefined): void {
    const forwards = live !== undefined && live.engine.forward !== undefined && !live.spec.declaresTensors;
    const passes = forwards && live.schedulers === undefined;
    setMember(this.passingThrough.unary, name, passes && !live.spec.decoupled);
    setMember(this.passingThrough.stream, name, passes && live.spec.decoupled);
  }

  /** Counts a model folder as in use until the returned function is called. */
  private holdFolder(folder: string | undefined): () => void {
    return folder === undefined ? () => undefined : this.pendingFolders.hold(folder);
  }

  private build(candidate: Candidate, record: ModelRecord): LiveModel {
    const { source, config } = candidate;
    if (config instanceof ConfigError) throw config;
    // The candidate's name: the folder's, or a single file's config name, else its file name
    // (a ConfigMap key such as `identity-fp32.pbtxt` whose config has no `name`).
    const origin = candidate.origin ?? source.path;
    const spec = toModelSpec(config, origin, candidate.name, configText(source.format, source.content));
    const versions = servedVersions(spec.config.versionPolicy, source.versions, origin);
    const files =
      source.folder === undefined ? undefined : { folder: source.folder, versions: source.versions, served: versions };
    const engine = this.options.createEngine(spec, source.path, files);
    const scheduled = this.options.schedules?.(spec, source.path) ?? false;
    if (scheduled && spec.scheduling.sequenceBatching !== undefined) this.checkSequences(origin, engine);
    const schedulers =
      scheduled && asksForScheduling(spec)
        ? new Map(versions.map((version) => [version, this.scheduler(spec, version, engine, record)]))
        : undefined;
    return {
      spec,
      engine,
      versions,
      source: source.path,
      inFlight: new InFlight(),
      loadedAt: Date.now(),
      ...(source.folder !== undefined ? { folder: source.folder } : {}),
      scheduled,
      ...(schedulers !== undefined ? { schedulers } : {}),
    };
  }

  /** One version's scheduler: the sequence batcher for a model with sequence_batching, else the queue of dynamic_batching. */
  private scheduler(spec: ModelSpec, version: string, engine: Engine, record: ModelRecord): RequestScheduler {
    const common = {
      model: spec.name,
      version,
      scheduling: spec.scheduling,
      engine,
      statistics: statisticsOf(record, version),
    };
    if (spec.scheduling.sequenceBatching === undefined) return new Scheduler(common);
    const { logger } = this.options;
    return new SequenceScheduler({ ...common, warn: (message) => logger.warn({ model: spec.name }, message) });
  }

  /** A sequence lives in one process: with several --grpc-workers its requests could reach any of them. */
  private checkSequences(origin: string, engine: Engine): void {
    if ((this.options.grpcWorkers ?? 1) <= 1) return;
    void engine.close().catch(() => undefined);
    throw new UnsupportedFeature(origin, SEQUENCE_WORKERS_REASON);
  }

  /** Takes the model out of service at once; its engine closes once its requests are done. */
  private async retire(record: ModelRecord, reason: string): Promise<void> {
    const live = record.live;
    record.live = undefined;
    this.notePassThrough(record.name, undefined);
    record.state = "UNAVAILABLE";
    record.reason = reason;
    if (live !== undefined) {
      this.closeWhenIdle(live);
      this.options.logger.info({ model: record.name, reason }, "model unloaded");
    }
  }

  /**
   * Closes an engine no new request can reach once the requests it is running are done
   * (or the grace has passed, or the registry closes), without holding up the registry's
   * queue meanwhile.
   */
  private closeWhenIdle(live: LiveModel): void {
    let graceTimer: NodeJS.Timeout | undefined;
    const grace = new Promise<void>((resolve) => {
      graceTimer = setTimeout(resolve, this.options.retireGraceMs);
      graceTimer.unref();
    });
    this.retiringModels.add(live);
    const retired = Promise.race([live.inFlight.idle(), grace, this.closed])
      .then(() => {
        clearTimeout(graceTimer);
        if (live.inFlight.size > 0) {
          this.options.logger.warn(
            { model: live.spec.name, requests: live.inFlight.size },
            "closing a retired engine with requests still running",
          );
        }
        // What is still queued is refused (and its timers cleared) before the engine goes.
        for (const scheduler of live.schedulers?.values() ?? []) scheduler.close();
        return live.engine.close();
      })
      .catch((error: unknown) =>
        this.options.logger.error({ model: live.spec.name, err: errorMessage(error) }, "closing an engine failed"),
      )
      .finally(() => {
        this.retiring.delete(retired);
        this.retiringModels.delete(live);
      });
    this.retiring.add(retired);
  }
}

/** Why a load in progress at close() failed. */
const STOPPED_LOADING = "stopped loading: the server is shutting down";

/** A load the registry stopped (shutdown, --model-load-timeout-secs): not the model's or config's fault. */
class LoadStopped extends DataPlaneError {
  constructor(message: string) {
    super("Unavailable", message);
  }
}

const engineReady = (model: LiveModel): boolean => model.engine.ready?.() ?? true;

/**
 * Whether a model's config asks the data plane to schedule its requests: one without
 * dynamic_batching, sequence_batching, instance_group or model_warmup goes straight to its engine, with no
 * scheduling work per request.
 */
function asksForScheduling(spec: ModelSpec): boolean {
  return (
    spec.scheduling.dynamicBatching !== undefined ||
    spec.scheduling.sequenceBatching !== undefined ||
    spec.config.instanceGroup.length > 0 ||
    spec.config.modelWarmup.length > 0
  );
}

/** The statistics of one version of a model, kept across its reloads. */
function statisticsOf(record: ModelRecord, version: string): VersionStatistics {
  let statistics = record.statistics.get(version);
  if (statistics === undefined) {
    statistics = new VersionStatistics();
    record.statistics.set(version, statistics);
  }
  return statistics;
}

function newRecord(name: string): ModelRecord {
  return { name, state: "UNAVAILABLE", reason: "", live: undefined, fingerprint: undefined, statistics: new Map() };
}

/** What RepositoryIndex and a refused request say of a model: a failed download first. */
function reasonOf(record: ModelRecord): string {
  if (record.downloadFailure === undefined) return record.reason;
  const serving = record.live !== undefined ? "; still serving the last good files" : "";
  return `download failed: ${record.downloadFailure}${serving}`;
}

/**
 * A failed download as a load's error: worth retrying (the store unreachable, an object
 * changed or gone mid-download) is UNAVAILABLE, a full cache RESOURCE_EXHAUSTED, the rest
 * (access denied, no such bucket, unsafe keys) INVALID_ARGUMENT, as a load that cannot work.
 */
function downloadErrorKind(error: unknown): ErrorKind {
  const kind = (error as { kind?: string } | undefined)?.kind;
  if (kind === "unreachable" || kind === "changed" || kind === "not-found") return "Unavailable";
  if (kind === "cache-full") return "ResourceExhausted";
  return "InvalidArgument";
}

/**
 * A repository model with a load request's config override applied: the override stands in
 * for its config file, and its files are found where the repository has them (the source
 * keeps its path and folder: engines of single-file configs look next to the file).
 */
function overriddenCandidate(found: Candidate, overrideJson: string): Candidate {
  const origin = `RepositoryModelLoad(${found.name}).parameters["config"]`;
  const source: ModelSource = { ...found.source, format: "json", content: undefined, fingerprint: "override" };
  const candidate = (config: ModelConfig | ConfigError): Candidate => ({ name: found.name, source, config, origin });
  if (found.config instanceof ConfigError) {
    const detail = `the model's config in the repository cannot be read, and an override only changes a readable one (${found.config.message})`;
    return candidate(new ConfigError(origin, detail));
  }
  try {
    return candidate(applyConfigOverride(found.name, found.config, overrideJson, origin));
  } catch (error) {
    return candidate(error instanceof ConfigError ? error : new ConfigError(origin, errorMessage(error)));
  }
}

function setMember(set: Set<string>, name: string, member: boolean): void {
  if (member) set.add(name);
  else set.delete(name);
}
