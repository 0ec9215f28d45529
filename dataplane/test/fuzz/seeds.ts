import type { MethodDefinition } from "@grpc/grpc-js";
import { service as healthService } from "grpc-health-check";
import { InferenceExtensionsService } from "../../../proto/gen/ts/extensions.js";
import { GRPCInferenceServiceService, type InferParameter } from "../../../proto/gen/ts/grpc_service.js";
import { joinBytesElements } from "../../src/tensors/bytes.js";
import { emptyContents } from "../../src/tensors/typed.js";
import { addSubRequest, identityRequest, promptRequest } from "../fixtures/requests.js";
import { inferRequest } from "../fixtures/server.js";
import { inRegion } from "../fixtures/shm-segments.js";

/**
 * Valid requests for every RPC the fuzz tier mutates: each service method with the
 * requests a real client sends (the seeds), and how to encode and decode them.
 */

export interface FuzzedMethod {
  readonly name: string;
  readonly definition: MethodDefinition<object, object>;
  readonly seeds: readonly object[];
  /** How often it is picked, relative to the others: inference has the most to get wrong. */
  readonly weight: number;
}

const encoder = new TextEncoder();
const int64 = (value: number): InferParameter => ({ parameterChoice: { $case: "int64Param", value: BigInt(value) } });

/**
 * The system shared-memory regions the seeds name, and their segments: keys under this run's
 * test prefix (dataplane/test/fixtures/shm-segments.ts), which the suite creates and removes.
 */
export const FUZZ_REGIONS = {
  input: { name: "fuzz-in", key: `/dk-test-${process.pid}-fuzz-in`, byteSize: 64 },
  output: { name: "fuzz-out", key: `/dk-test-${process.pid}-fuzz-out`, byteSize: 64 },
} as const;
const REGISTER_SEEDS = Object.values(FUZZ_REGIONS).map(({ name, key, byteSize }) => ({
  name,
  key,
  offset: 0n,
  byteSize: BigInt(byteSize),
}));

/** ModelInfer requests of every bundled example model: raw, typed, BYTES, decoupled, LLM, ONNX. */
const INFER_SEEDS = [
  identityRequest({ batch: 2, width: 4, id: "raw" }),
  inferRequest({
    modelName: "identity_int32",
    id: "typed",
    inputs: [
      {
        name: "INPUT0",
        datatype: "INT32",
        shape: [4n],
        parameters: {},
        contents: { ...emptyContents(), intContents: [1, 2, 3, 4] },
      },
    ],
    outputs: [{ name: "OUTPUT0", parameters: {} }],
  }),
  inferRequest({
    modelName: "identity_bytes",
    inputs: [{ name: "INPUT0", datatype: "BYTES", shape: [1n, 2n], parameters: {}, contents: undefined }],
    rawInputContents: [joinBytesElements([encoder.encode("hello"), encoder.encode("world")])],
  }),
  inferRequest({
    modelName: "repeat_int32",
    parameters: { triton_enable_empty_final_response: { parameterChoice: { $case: "boolParam", value: true } } },
    inputs: [
      { name: "IN", datatype: "INT32", shape: [3n], parameters: {}, contents: undefined },
      { name: "DELAY", datatype: "UINT32", shape: [3n], parameters: {}, contents: undefined },
    ],
    rawInputContents: [new Uint8Array(Int32Array.of(1, 2, 3).buffer), new Uint8Array(Uint32Array.of(0, 1, 2).buffer)],
  }),
  { ...promptRequest({ maxTokens: 3 }), parameters: { max_tokens: int64(3), seed: int64(7) } },
  addSubRequest(),
  // Tensors in system shared memory: input and output in the suite's regions (found only with --allow-client-shm).
  inferRequest({
    modelName: "identity_fp32",
    inputs: [
      {
        name: "INPUT0",
        datatype: "FP32",
        shape: [1n, 4n],
        parameters: inRegion(FUZZ_REGIONS.input.name, 16, 0),
        contents: undefined,
      },
    ],
    outputs: [{ name: "OUTPUT0", parameters: inRegion(FUZZ_REGIONS.output.name, 16, 0) }],
  }),
];

const MODEL = { name: "identity_fp32", version: "" };

const SEEDS: Record<keyof typeof GRPCInferenceServiceService, readonly object[]> = {
  serverLive: [{}],
  serverReady: [{}],
  modelReady: [MODEL, { name: "repeat_int32", version: "1" }],
  serverMetadata: [{}],
  modelMetadata: [MODEL, { name: "add_sub_onnx", version: "1" }],
  modelInfer: INFER_SEEDS,
  modelStreamInfer: INFER_SEEDS,
  modelConfig: [MODEL, { name: "mock_llm", version: "" }],
  modelStatistics: [MODEL, { name: "", version: "" }],
  repositoryIndex: [
    { repositoryName: "", ready: false },
    { repositoryName: "", ready: true },
  ],
  repositoryModelLoad: [{ repositoryName: "", modelName: "identity_fp32", parameters: {} }],
  repositoryModelUnload: [{ repositoryName: "", modelName: "identity_fp32", parameters: {} }],
  systemSharedMemoryStatus: [{ name: "" }, { name: FUZZ_REGIONS.input.name }],
  systemSharedMemoryRegister: REGISTER_SEEDS,
  systemSharedMemoryUnregister: [{ name: "region" }],
  cudaSharedMemoryStatus: [{ name: "" }, { name: FUZZ_REGIONS.input.name }],
  cudaSharedMemoryRegister: [{ name: "region", rawHandle: new Uint8Array(64), deviceId: 0n, byteSize: 64n }],
  cudaSharedMemoryUnregister: [{ name: "region" }],
  traceSetting: [{ settings: { trace_level: { value: ["TIMESTAMPS"] } }, modelName: "" }],
  // Settings a client may really change without turning the server's logs into a flood.
  logSettings: [{ settings: { log_info: { parameterChoice: { $case: "boolParam", value: true } } } }],
};

const INFERENCE_WEIGHT = 4;

const methodsOf = (service: Record<string, unknown>, seeds: Record<string, readonly object[]>): FuzzedMethod[] =>
  Object.entries(seeds).map(([name, methodSeeds]) => ({
    name,
    definition: service[name] as MethodDefinition<object, object>,
    seeds: methodSeeds,
    weight: methodSeeds === INFER_SEEDS ? INFERENCE_WEIGHT : 1,
  }));

/** Every method of the inference service, the extension service and health's Check. */
export const FUZZED_METHODS: readonly FuzzedMethod[] = [
  ...methodsOf(GRPCInferenceServiceService, SEEDS),
  ...methodsOf(InferenceExtensionsService, { modelInferStream: INFER_SEEDS }),
  ...methodsOf(healthService, { Check: [{ service: "" }, { service: "inference.GRPCInferenceService" }] }),
];

const TOTAL_WEIGHT = FUZZED_METHODS.reduce((sum, method) => sum + method.weight, 0);

/** The method a plan's number picks, by weight. */
export function pickMethod(choice: number): FuzzedMethod {
  let left = choice % TOTAL_WEIGHT;
  for (const method of FUZZED_METHODS) {
    if (left < method.weight) return method;
    left -= method.weight;
  }
  throw new Error("unreachable: the weights add up to TOTAL_WEIGHT");
}
