import { readdir, readFile, stat } from "node:fs/promises";
import { join, relative } from "node:path";
import { ModelInstanceGroup_Kind, type ModelConfig } from "../../../proto/gen/ts/model_config.js";
import {
  autoCompleteConfig,
  decoupledEnsembles,
  ensemblesToForward,
  forwardedConfig,
  localSupport,
  type LocalSupport,
} from "../../../lib/engines/catalog.js";
import { ensembleStepModels } from "../../../lib/engines/ensemble.js";
import { openAiServedConfig } from "../../../lib/engines/openai.js";
import { errorMessage } from "../../../lib/errors.js";
import { ConfigError, configText } from "../../../lib/model-repository/config.js";
import { parseCandidate, type Candidate } from "../../../lib/model-repository/candidates.js";
import { scanModelSources, type ModelSource } from "../../../lib/model-repository/sources.js";
import { toModelSpec } from "../../../lib/model-repository/spec.js";
import { servedVersions } from "../../../lib/model-repository/versions.js";

/**
 * How each model of a Triton model repository moves to dynamo-kserve: read and checked
 * with the data plane's own parser (auto-completing ONNX models without a config.pbtxt, as
 * the data plane would), then run in-process where this data plane can, else forwarded to
 * the Triton that serves it today.
 */

const ONNX_BACKENDS = new Set(["onnxruntime", "onnxruntime_onnx"]);
const VLLM_BACKEND = "vllm";
const PYTHON_BACKEND = "python";

/** Where the files of in-process (ONNX, Python) models come from in the cluster. */
export type ModelFilesSource =
  | { readonly kind: "configMap" }
  | { readonly kind: "persistentVolumeClaim"; readonly claimName: string }
  /** The same repository in object storage (s3://, gs://, as://): the CRs point at each model's folder there. */
  | { readonly kind: "storage"; readonly uri: string; readonly secretName?: string };

/** A model folder's location under a repository URI. */
export const folderUri = (uri: string, folder: string): string =>
  folder === "" ? uri : `${uri.replace(/\/+$/, "")}/${folder}`;

export interface MigrationOptions {
  /** host:port of the Triton gRPC endpoint that serves the repository today. */
  readonly tritonEndpoint?: string;
  /** Base URL of the vLLM OpenAI server that serves Triton's vLLM-backend models from now on. */
  readonly vllmUrl?: string;
  /** Forward Python-backend models to the Triton too (--forward-python) instead of running them here. */
  readonly forwardPython?: boolean;
  readonly modelFiles: ModelFilesSource;
}

/** One model file shipped in a ConfigMap: its path in the model folder and its bytes. */
export interface ModelFile {
  readonly path: string;
  readonly content: Uint8Array;
}

export type ModelPlan =
  | {
      readonly ok: true;
      readonly model: string;
      readonly versions: readonly string[];
      readonly platform: string;
      /** The engine that will serve it: a local one, or kserve-grpc (forwarded to Triton). */
      readonly engine: string;
      readonly notes: readonly string[];
      /** The configuration to ship (normalized; engine parameters added for forwarding). */
      readonly config: ModelConfig;
      /** For models with files (ONNX, Python): the files, when shipped in a ConfigMap; the folder in the repository otherwise. */
      readonly modelFiles?: { readonly folder: string; readonly files?: readonly ModelFile[] };
    }
  | { readonly ok: false; readonly model: string; readonly platform: string; readonly error: string };

/** A ConfigMap holds at most 1 MiB; leave room for the keys and the object itself. */
export const CONFIGMAP_FILES_LIMIT = 900 * 1024;

export async function planMigration(repository: string, options: MigrationOptions): Promise<ModelPlan[]> {
  const sources = await scanModelSources([repository], []);
  const candidates: Candidate[] = [];
  for (const source of sources) candidates.push(await parseCandidate(source, { completeConfig: autoCompleteConfig }));
  const ensembles = ensemblesOf(candidates, options);
  const plans: ModelPlan[] = [];
  for (const candidate of candidates) plans.push(await planModel(repository, candidate, options, ensembles));
  return plans;
}

/**
 * The repository's ensembles, by name: forwarded with the step that must be (a model this
 * data plane cannot run), or run here with their steps, and what a migrated config marks.
 */
interface Ensembles {
  /** Each forwarded ensemble's reason: the step that is forwarded, and why. */
  readonly forwardedFor: ReadonlyMap<string, string>;
  /** Ensembles with a decoupled step, their configs marked decoupled (as Triton marks them). */
  readonly decoupled: ReadonlyMap<string, ModelConfig>;
}

function ensemblesOf(candidates: readonly Candidate[], options: MigrationOptions): Ensembles {
  const configs = new Map<string, ModelConfig>();
  const support = new Map<string, LocalSupport>();
  for (const { name, source, config } of candidates) {
    if (config instanceof ConfigError) continue;
    configs.set(name, config);
    support.set(name, supportOf(config, source.path, options));
  }
  const forwardedFor = ensemblesToForward(configs, (name) => {
    const decision = support.get(name);
    return decision?.runsHere === false ? decision.reason : undefined;
  });
  return { forwardedFor, decoupled: decoupledEnsembles(configs) };
}

/** The data plane's rule (--forward-unsupported's): whether the model runs there, else why not. */
const supportOf = (config: ModelConfig, source: string, options: MigrationOptions): LocalSupport =>
  localSupport(config, source, { forwardPython: options.forwardPython === true });

async function planModel(
  repository: string,
  candidate: Candidate,
  options: MigrationOptions,
  ensembles: Ensembles,
): Promise<ModelPlan> {
  const { source } = candidate;
  const failed = (error: unknown, platform = ""): ModelPlan => ({
    ok: false,
    model: candidate.name,
    platform,
    error: error instanceof ConfigError ? error.message : errorMessage(error),
  });
  if (candidate.config instanceof ConfigError) return failed(candidate.config);
  const ensembleReason = ensembles.forwardedFor.get(candidate.name);
  const config =
    ensembleReason === undefined ? (ensembles.decoupled.get(candidate.name) ?? candidate.config) : candidate.config;
  const platform = platformOf(config);
  try {
    const spec = toModelSpec(config, source.path, candidate.name, configText(source.format, source.content));
    const versions = servedVersions(config.versionPolicy, source.versions, source.path);
    const notes = [...commonNotes(config, source)];
    if (config.backend === VLLM_BACKEND && options.vllmUrl !== undefined) {
      return await toVllmServer(candidate.name, versions, source, config, notes, options.vllmUrl);
    }
    const support = supportOf(config, source.path, options);
    const reason = ensembleReason ?? (support.runsHere ? undefined : support.reason);
    if (reason !== undefined) return forwarded(candidate.name, versions, platform, config, reason, notes, options);
    const engine = config.parameters["engine"]?.stringValue ?? spec.backend;
    if (engine === "ensemble") notes.push(...ensembleNotes(candidate.config, config));
    // Engines that run the model's own files here: ONNX models, Python models (model.py).
    const filesEngine = ONNX_BACKENDS.has(engine) ? "onnx" : engine === PYTHON_BACKEND ? "python" : undefined;
    const shipped = filesEngine === "onnx" ? onnxOnCpu(config) : config;
    const local = { ok: true as const, model: candidate.name, versions, platform, notes, config: shipped };
    if (filesEngine === undefined) return { ...local, engine };
    notes.push(...(filesEngine === "onnx" ? onnxNotes(config) : pythonNotes(config)));
    const folder = relative(repository, source.folder ?? source.path);
    if (options.modelFiles.kind === "persistentVolumeClaim") {
      notes.push(`files from PVC ${options.modelFiles.claimName}, ${folder}/`);
      return { ...local, engine: filesEngine, modelFiles: { folder } };
    }
    if (options.modelFiles.kind === "storage") {
      notes.push(`files from ${folderUri(options.modelFiles.uri, folder)}/`);
      return { ...local, engine: filesEngine, modelFiles: { folder } };
    }
    const files = await modelFilesOf(source, versions);
    if (files.length === 0)
      return failed(`${folder}: no model files in version folder(s) ${versions.join(", ")}`, platform);
    const size = files.reduce((total, file) => total + file.content.length, 0);
    if (size > CONFIGMAP_FILES_LIMIT) {
      return failed(
        `${folder}: model files of ${Math.round(size / 1024)} KiB do not fit a ConfigMap; pass --model-files pvc:<claim> (a PersistentVolumeClaim holding this repository)`,
        platform,
      );
    }
    notes.push(`files in a ConfigMap (${Math.max(1, Math.round(size / 1024))} KiB)`);
    return { ...local, engine: filesEngine, modelFiles: { folder, files } };
  } catch (error) {
    return failed(error, platform);
  }
}

/** A model the data plane does not run, forwarded to the Triton that serves it now; `reason` says why, first in its notes. */
function forwarded(
  model: string,
  versions: readonly string[],
  platform: string,
  config: ModelConfig,
  reason: string,
  notes: string[],
  options: MigrationOptions,
): ModelPlan {
  if (options.tritonEndpoint === undefined) {
    return {
      ok: false,
      model,
      platform,
      error:
        platform === VLLM_BACKEND
          ? `${reason}; pass --vllm-url http://<vllm>:8000/v1 to serve it from a vLLM OpenAI server, or --triton-endpoint host:port to forward it to the Triton that serves it now`
          : `${reason}; pass --triton-endpoint host:port to forward it to the Triton that serves it now`,
    };
  }
  return {
    ok: true,
    model,
    versions,
    platform,
    engine: "kserve-grpc",
    notes: [reason, `forwarded to ${options.tritonEndpoint}`, ...notes, ...forwardedNotes(config)],
    config: forwardedConfig(config, options.tritonEndpoint),
  };
}

/**
 * A vLLM-backend model moved to a vLLM OpenAI server: the upstream model is the one its
 * model.json names (the name such a server serves it under unless --served-model-name).
 */
async function toVllmServer(
  model: string,
  versions: readonly string[],
  source: ModelSource,
  config: ModelConfig,
  notes: string[],
  url: string,
): Promise<ModelPlan> {
  const latest = versions[versions.length - 1];
  const file =
    source.folder === undefined || latest === undefined ? undefined : join(source.folder, latest, "model.json");
  const fail = (error: string): ModelPlan => ({ ok: false, model, platform: VLLM_BACKEND, error });
  if (!/^https?:\/\/\S+$/.test(url))
    return fail(`--vllm-url '${url}' is not an http(s) URL (e.g. http://vllm:8000/v1)`);
  if (file === undefined) return fail("a vLLM model needs <model>/<version>/model.json naming the model it serves");
  let upstream: unknown;
  try {
    upstream = (JSON.parse(await readFile(file, "utf8")) as { model?: unknown }).model;
  } catch (error) {
    return fail(`${file}: ${errorMessage(error)}`);
  }
  if (typeof upstream !== "string" || upstream === "") return fail(`${file}: "model" must name the model vLLM serves`);
  return {
    ok: true,
    model,
    versions,
    platform: VLLM_BACKEND,
    engine: "openai",
    notes: [
      `served by the vLLM OpenAI server at ${url} as '${upstream}' (model.json)`,
      config.input.length > 0 ? "tensors kept" : "the vLLM backend's tensors declared",
      ...notes,
    ],
    config: openAiServedConfig(config, url, upstream),
  };
}

const platformOf = (config: ModelConfig): string => config.platform || config.backend;

function commonNotes(config: ModelConfig, source: ModelSource): string[] {
  const notes: string[] = [];
  if (source.content === undefined) notes.push("config auto-completed from the model file");
  if (config.modelTransactionPolicy?.decoupled) notes.push("decoupled: streams on ModelStreamInfer");
  if (config.versionPolicy?.policyChoice?.$case === "specific") notes.push("version_policy specific kept");
  notes.push(...warmupNotes(config));
  return notes;
}

/** What a model's model_warmup asks of the migration: its samples run before READY, wherever it runs. */
function warmupNotes(config: ModelConfig): string[] {
  // As Triton, a sample of batch_size 0 is skipped.
  const samples = config.modelWarmup.filter((sample) => sample.batchSize > 0);
  if (samples.length === 0) return [];
  const notes = [`model_warmup: ${samples.length} sample(s) run on each instance before READY`];
  const files = samples.flatMap((sample) =>
    Object.values(sample.inputs).flatMap((input) =>
      input.inputDataType?.$case === "inputDataFile" ? [input.inputDataType.value] : [],
    ),
  );
  if (files.length > 0) {
    // modelFilesOf ships the version folders only: the warmup/ folder needs the whole model folder.
    notes.push(
      `model_warmup reads warmup/${[...new Set(files)].join(", warmup/")}: ship the model folder whole (--model-files pvc:<claim> or a bucket), a ConfigMap carries the version folders only`,
    );
  }
  return notes;
}

/** What Triton keeps doing for a forwarded model. */
function forwardedNotes(config: ModelConfig): string[] {
  const notes: string[] = [];
  const scheduling = config.schedulingChoice?.$case;
  if (scheduling === "sequenceBatching") notes.push("sequences stay on one upstream (sequence_id)");
  if (scheduling === "dynamicBatching") notes.push("Triton batches");
  return notes;
}

/** A local ensemble: where its steps run, and the decoupling Triton would have inferred. */
function ensembleNotes(original: ModelConfig, shipped: ModelConfig): string[] {
  const steps = [...new Set(ensembleStepModels(original))].map((name) => `'${name}'`).join(", ");
  // Each DynamoKserveModel is a data plane of its own: the steps must be served beside it.
  const notes = [
    `ensemble run here, not by Triton: its steps (${steps}) must be models of the same data plane (a DynamoKserveRepository serving this repository)`,
  ];
  if (shipped !== original) notes.push("decoupled (a step is): model_transaction_policy { decoupled: true } added");
  return notes;
}

/** What Triton did for an ONNX model that the in-process engine does not. */
function onnxNotes(config: ModelConfig): string[] {
  const notes: string[] = [];
  if (config.instanceGroup.some((group) => group.kind === ModelInstanceGroup_Kind.KIND_GPU)) {
    notes.push("instance_group KIND_GPU set to KIND_CPU: the image's onnxruntime has no GPU provider");
  }
  if (config.output.some((output) => output.labelFilename !== "")) {
    notes.push("label_filename not applied: outputs are raw tensors");
  }
  return notes;
}

/**
 * The config an ONNX model is shipped with: its KIND_GPU instance groups as as many KIND_CPU
 * instances (the data plane's onnxruntime runs on the CPU, and refuses KIND_GPU where it has
 * no GPU provider: the migrated model would never load). Everything else, dynamic batching
 * and instance counts included, runs as Triton ran it.
 */
function onnxOnCpu(config: ModelConfig): ModelConfig {
  if (!config.instanceGroup.some((group) => group.kind === ModelInstanceGroup_Kind.KIND_GPU)) return config;
  return {
    ...config,
    instanceGroup: config.instanceGroup.map((group) =>
      group.kind === ModelInstanceGroup_Kind.KIND_GPU
        ? {
            ...group,
            kind: ModelInstanceGroup_Kind.KIND_CPU,
            count: Math.max(1, group.count) * Math.max(1, group.gpus.length),
            gpus: [],
          }
        : group,
    ),
  };
}

/** What Triton did for a Python model that the python engine does differently. */
function pythonNotes(config: ModelConfig): string[] {
  const notes = ["model.py run by the python engine (its Python packages must be in the image)"];
  if (config.instanceGroup.some((group) => group.kind === ModelInstanceGroup_Kind.KIND_GPU)) {
    notes.push("instance_group KIND_GPU: runs on the CPU (no GPU tensors)");
  }
  if (config.parameters["EXECUTION_ENV_PATH"] !== undefined) {
    notes.push("EXECUTION_ENV_PATH not applied: the image's Python runs the model");
  }
  return notes;
}

/**
 * The files of the served version folders, as paths relative to the model folder (files
 * only: a Python model's __pycache__ and other folders stay behind). A symbolic link to a
 * file is shipped with its target's content, as Triton reads it (a repository often links
 * one model.py into several models); a link to nothing is left out.
 */
async function modelFilesOf(source: ModelSource, versions: readonly string[]): Promise<ModelFile[]> {
  if (source.folder === undefined) return [];
  const files: ModelFile[] = [];
  for (const version of versions) {
    const folder = join(source.folder, version);
    const names = (await readdir(folder).catch(() => [])).sort();
    for (const name of names) {
      const isFile = await stat(join(folder, name)).then(
        (info) => info.isFile(),
        () => false,
      );
      if (isFile) files.push({ path: `${version}/${name}`, content: await readFile(join(folder, name)) });
    }
  }
  return files;
}
