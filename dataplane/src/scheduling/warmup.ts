import { randomFillSync } from "node:crypto";
import { readFile, realpath, stat } from "node:fs/promises";
import { isAbsolute, join, relative, sep } from "node:path";
import { DataPlaneError, errorMessage, invalidArgument } from "../../../lib/errors.js";
import { configTypeName, DATATYPES } from "../../../lib/model-repository/datatypes.js";
import {
  MAX_WARMUP_INPUT_BYTES,
  type WarmupInput,
  type WarmupSample,
} from "../../../lib/model-repository/scheduling.js";
import type { ModelSpec } from "../../../lib/model-repository/spec.js";
import type { Engine, EngineRequest, Execution } from "../engines/engine.js";
import { fitsDims, rawSizeMismatch } from "../tensors/request.js";
import { elementCount, type Tensor } from "../tensors/tensor.js";
import { nowNs, type VersionStatistics } from "../models/statistics.js";

/**
 * Triton's model warmup (model_config.proto `model_warmup`; its backend_model_instance.cc):
 * before a model is READY, every sample runs `count` times on every instance of every
 * served version. A sample of batch size B is one execution of B requests of batch 1, given
 * to the engine as the scheduler gives a batch (one Execution), so the engine's batching
 * path warms too. Like Triton's, the runs go to the engine directly, past the scheduler's
 * queues, and are counted in the model's statistics as Triton counts them (each request an
 * inference with no queue time, each run an execution of its batch size), once the whole
 * warmup has succeeded. A failing run fails the load, naming the sample.
 */

/** What warmup needs of a model being loaded (a LiveModel is one). */
export interface WarmupTarget {
  readonly spec: ModelSpec;
  readonly engine: Engine;
  readonly versions: readonly string[];
  /** Its engine is one the data plane schedules (EngineDescription.scheduled); others are not warmed here. */
  readonly scheduled: boolean;
  /** The model folder; a file sample reads `<folder>/warmup/<input_data_file>`. */
  readonly folder?: string;
  /** Where a version's runs are counted; absent: nowhere. */
  readonly statistics?: (version: string) => WarmupStatistics;
}

/** What warmup records of its runs (a VersionStatistics is one). */
export type WarmupStatistics = Pick<VersionStatistics, "recordSuccess" | "recordExecution">;

/** The folder of a model's warmup data files, as Triton names it. */
export const WARMUP_FOLDER = "warmup";

/**
 * Runs the model's warmup samples, resolving once every run has succeeded; rejects with
 * an InvalidArgument (as Triton) naming the sample when one fails or its data cannot be
 * made. `signal` stops it (the load timeout, shutdown). Models of engines the data plane
 * does not schedule (forwarded to another server, which warms them itself) are left alone.
 */
export async function warmUp(target: WarmupTarget, signal: AbortSignal): Promise<void> {
  const { spec } = target;
  const samples = spec.scheduling.warmup;
  if (samples.length === 0 || !target.scheduled) return;
  const prepared: PreparedSample[] = [];
  for (const sample of samples) prepared.push(await prepareSample(sample, spec, target.folder));
  const runs: Run[] = [];
  for (const version of target.versions) {
    const instances = Array.from({ length: spec.scheduling.instanceCount }, (_, instance) => instance);
    // Instances warm in parallel (each is its own executor); the first failure stops the others.
    const stopOthers = new AbortController();
    const running = AbortSignal.any([signal, stopOthers.signal]);
    await Promise.all(
      instances.map((instance) =>
        warmInstance(target.engine, prepared, version, instance, running, runs).catch((error: unknown) => {
          stopOthers.abort();
          throw error;
        }),
      ),
    );
  }
  // Counted only now: a warmup that fails (an update refused) leaves the served model's statistics alone.
  if (target.statistics !== undefined) for (const run of runs) count(run, target.statistics(run.version));
}

/** One successful run of a sample: an execution of `batchSize` requests of batch 1. */
interface Run {
  readonly version: string;
  readonly batchSize: number;
  readonly ns: bigint;
}

/** As Triton counts a warmup run: each request an inference that did not queue, the run one execution. */
function count(run: Run, statistics: WarmupStatistics): void {
  const compute = { computeInputNs: 0n, computeInferNs: run.ns, computeOutputNs: 0n };
  for (let request = 0; request < run.batchSize; request++) {
    statistics.recordSuccess(run.ns, 1, { ...compute, queueNs: 0n });
  }
  statistics.recordExecution(run.batchSize, compute);
}

/** A sample with its input tensors made, shared by every run. */
interface PreparedSample {
  readonly sample: WarmupSample;
  /** The inputs of each of its requests (each of batch 1 when the model batches). */
  readonly inputs: readonly Tensor[];
}

async function warmInstance(
  engine: Engine,
  samples: readonly PreparedSample[],
  version: string,
  instance: number,
  signal: AbortSignal,
  runs: Run[],
): Promise<void> {
  for (const { sample, inputs } of samples) {
    for (let run = 0; run < sample.count; run++) {
      if (signal.aborted) throw stoppedError(signal);
      const started = nowNs();
      const failures = await runOnce(engine, sample, inputs, version, instance, signal);
      if (failures.length > 0) {
        throw invalidArgument(
          `model_warmup '${sample.name}': failed on instance ${instance} of version ${version}: ${failures.join("; ")}`,
        );
      }
      runs.push({ version, batchSize: sample.batchSize, ns: nowNs() - started });
    }
  }
}

/** One execution of the sample: its requests given to the engine as one batch; what each failed with. */
async function runOnce(
  engine: Engine,
  sample: WarmupSample,
  inputs: readonly Tensor[],
  version: string,
  instance: number,
  signal: AbortSignal,
): Promise<string[]> {
  const requests: EngineRequest[] = Array.from({ length: sample.batchSize }, () => ({
    id: "",
    version,
    parameters: {},
    inputs,
    requestedOutputs: new Set<string>(),
  }));
  const execution: Execution = { instance, requests, release: () => undefined };
  const options = { signal, deadline: Infinity, traceHeaders: {}, execution };
  const outcomes = await Promise.allSettled(
    requests.map(async (request) => {
      // Every response is read (a decoupled model's too) and dropped: warmup checks no values.
      for await (const response of engine.infer(request, options)) void response;
    }),
  );
  const failures = outcomes.flatMap((outcome) => (outcome.status === "rejected" ? [errorMessage(outcome.reason)] : []));
  return [...new Set(failures)];
}

function stoppedError(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new DataPlaneError("Unavailable", "warmup stopped");
}

async function prepareSample(
  sample: WarmupSample,
  spec: ModelSpec,
  folder: string | undefined,
): Promise<PreparedSample> {
  const batched = spec.maxBatchSize > 0;
  const inputs: Tensor[] = [];
  for (const input of sample.inputs) {
    // As Triton: each request of the sample has batch 1 (when the model batches) and the same data.
    const shape = batched ? [1, ...input.dims] : [...input.dims];
    try {
      checkDeclared(input, shape, spec);
      inputs.push({ name: input.name, datatype: input.datatype, shape, data: await inputData(input, shape, folder) });
    } catch (error) {
      throw invalidArgument(`model_warmup '${sample.name}': input '${input.name}': ${errorMessage(error)}`);
    }
  }
  // The runs go to the engine past the pipeline's request checks: held to the config here, as
  // Triton holds its warmup requests (InferenceRequest::Normalize).
  const given = new Set(sample.inputs.map((input) => input.name));
  const missing = spec.inputs.filter((declared) => !declared.optional && !given.has(declared.name));
  if (missing.length > 0) {
    const names = missing.map((declared) => `'${declared.name}'`).join(", ");
    throw invalidArgument(
      `model_warmup '${sample.name}': no data for the model's input ${names} (only optional inputs may be left out)`,
    );
  }
  return { sample, inputs };
}

/** A sample's input has the declared input's data type and a shape its dims allow. */
function checkDeclared(input: WarmupInput, shape: readonly number[], spec: ModelSpec): void {
  const declared = spec.inputs.find((candidate) => candidate.name === input.name);
  if (declared === undefined) return; // a model that declares no inputs (lib/model-repository/scheduling.ts checks the rest)
  if (declared.datatype !== input.datatype) {
    throw new Error(
      `data_type ${configTypeName(input.datatype)}, where the model's input is ${configTypeName(declared.datatype)}`,
    );
  }
  const batched = spec.maxBatchSize > 0;
  if (!fitsDims(shape, declared.dims, batched)) {
    throw new Error(
      `dims [${input.dims.join(",")}] do not fit the model's input [${declared.dims.join(",")}]${batched ? " (without the batch dimension)" : ""}`,
    );
  }
}

/** BYTES elements of zero or random warmup data: each an empty string (a zero 4-byte length), as Triton. */
const BYTES_LENGTH_PREFIX = 4;

async function inputData(
  input: WarmupInput,
  shape: readonly number[],
  folder: string | undefined,
): Promise<Uint8Array> {
  const elements = elementCount(shape);
  const bytes =
    input.datatype === "BYTES" ? elements * BYTES_LENGTH_PREFIX : elements * DATATYPES[input.datatype].byteSize;
  switch (input.data.kind) {
    case "zero":
      return new Uint8Array(bytes);
    case "random":
      // Random bytes, as Triton's (a float may be NaN); BYTES elements stay empty (Triton: zero data).
      return input.datatype === "BYTES" ? new Uint8Array(bytes) : randomFillSync(new Uint8Array(bytes));
    case "file": {
      const data = await readWarmupFile(folder, input.data.file);
      // The whole file is the tensor (BYTES: its 4-byte-length-prefixed elements, as Triton reads it).
      const mismatch = rawSizeMismatch(input.name, input.datatype, shape, data);
      if (mismatch !== undefined) throw new Error(`input_data_file '${input.data.file}': ${mismatch}`);
      return data;
    }
  }
}

/**
 * A warmup data file's bytes: `<model folder>/warmup/<file>`, resolved (symlinks included)
 * and refused unless it is a regular file inside that folder, so a config cannot make the
 * data plane read (or send to a model) any other file.
 */
export async function readWarmupFile(folder: string | undefined, file: string): Promise<Uint8Array> {
  const named = `input_data_file '${file}'`;
  if (folder === undefined) {
    throw new Error(
      `${named}: the model has no folder to hold ${WARMUP_FOLDER}/${file} (use zero_data or random_data)`,
    );
  }
  const allowed = join(await realpath(folder), WARMUP_FOLDER);
  let resolved: string;
  try {
    resolved = await realpath(join(folder, WARMUP_FOLDER, file));
  } catch {
    throw new Error(`${named}: no such file in the model's ${WARMUP_FOLDER}/ folder`);
  }
  const inside = relative(allowed, resolved);
  if (inside === "" || inside === ".." || inside.startsWith(`..${sep}`) || isAbsolute(inside)) {
    throw new Error(`${named}: resolves outside the model's ${WARMUP_FOLDER}/ folder`);
  }
  const info = await stat(resolved);
  if (!info.isFile()) throw new Error(`${named}: not a regular file`);
  if (info.size > MAX_WARMUP_INPUT_BYTES) {
    throw new Error(`${named}: ${info.size} bytes; warmup data is at most ${MAX_WARMUP_INPUT_BYTES}`);
  }
  return new Uint8Array(await readFile(resolved));
}
