import { credentials, Metadata } from "@grpc/grpc-js";
import { Command, InvalidArgumentError } from "commander";
import {
  GRPCInferenceServiceClient,
  type InferTensorContents,
  type ModelInferRequest,
  type ModelInferRequest_InferInputTensor,
  type ModelInferResponse,
  type ModelStreamInferResponse,
} from "../proto/gen/ts/grpc_service.js";
import { DATATYPES, isDatatype, type Datatype } from "../lib/model-repository/datatypes.js";
import { rawToTyped, emptyContents } from "../dataplane/src/tensors/typed.js";
import { unaryCall } from "../lib/grpc/unary-call.js";
import { commanderOption, text } from "../lib/contract/options.js";

/**
 * `dynamo-kserve infer`: a small client for trying a model without grpcurl or Python.
 * Inputs are `NAME:DATATYPE:SHAPE=VALUES`, e.g. `INPUT0:FP32:1x4=1,2,3,4` or
 * `INPUT0:BYTES:1=hello`. Prints the response as JSON; with --stream (ModelStreamInfer, for
 * decoupled models) each response as one line of JSON as it arrives.
 */

interface InferFlags {
  url: string;
  input: ModelInferRequest_InferInputTensor[];
  output?: string[];
  modelVersion: string;
  id: string;
  timeoutSecs: number;
  stream: boolean;
}

export function parseInput(
  spec: string,
  previous: ModelInferRequest_InferInputTensor[] = [],
): ModelInferRequest_InferInputTensor[] {
  const match = /^([^:=]+):([A-Z0-9]+):([0-9x]+)=(.*)$/s.exec(spec);
  if (match === null)
    throw new InvalidArgumentError(`expected NAME:DATATYPE:SHAPE=VALUES (e.g. INPUT0:FP32:1x4=1,2,3,4), got '${spec}'`);
  const [, name, datatype, shapeText, valuesText] = match as unknown as [string, string, string, string, string];
  if (!isDatatype(datatype)) throw new InvalidArgumentError(`unknown datatype '${datatype}'`);
  const shape = shapeText.split("x").map((dim) => BigInt(dim));
  const values = valuesText === "" ? [] : valuesText.split(",");
  return [...previous, { name, datatype, shape, parameters: {}, contents: toContents(datatype, values) }];
}

function toContents(datatype: Datatype, values: string[]): InferTensorContents {
  const contents = emptyContents();
  const field = DATATYPES[datatype].typedField;
  if (field === undefined)
    throw new InvalidArgumentError(`${datatype} inputs cannot be given as values on the command line`);
  const converted: unknown[] = values.map((value) => {
    if (datatype === "BYTES") return new TextEncoder().encode(value);
    if (datatype === "BOOL") return value === "true" || value === "1";
    if (datatype === "INT64" || datatype === "UINT64") return BigInt(value);
    return Number(value);
  });
  (contents[field] as unknown[]) = converted;
  return contents;
}

/** A response as plain JSON: outputs with their values decoded. */
export function describeResponse(response: ModelInferResponse): unknown {
  const outputs = response.outputs.map((output, index) => {
    const raw = response.rawOutputContents[index];
    const datatype = output.datatype as Datatype;
    const contents =
      raw !== undefined && DATATYPES[datatype]?.typedField !== undefined ? rawToTyped(datatype, raw) : output.contents;
    const field = DATATYPES[datatype]?.typedField;
    const values = field !== undefined && contents !== undefined ? contents[field] : raw;
    return {
      name: output.name,
      datatype: output.datatype,
      shape: output.shape.map(Number),
      values: Array.isArray(values)
        ? values.map((value: unknown) => (value instanceof Uint8Array ? new TextDecoder().decode(value) : value))
        : values,
    };
  });
  return { model_name: response.modelName, model_version: response.modelVersion, id: response.id, outputs };
}

const jsonReplacer = (_key: string, value: unknown): unknown => (typeof value === "bigint" ? value.toString() : value);

/** The failure text of a gRPC call, with the way out when the server says the model is decoupled. */
function failureOf(error: unknown): string {
  const details = (error as { details?: string }).details ?? String(error);
  return / is decoupled /.test(details) ? `${details} (infer --stream calls ModelStreamInfer)` : details;
}

async function inferOnce(client: GRPCInferenceServiceClient, request: ModelInferRequest, deadline: number) {
  const response = await unaryCall<ModelInferResponse>(
    (options, done) => client.modelInfer(request, new Metadata(), options, done),
    { deadline },
  );
  process.stdout.write(`${JSON.stringify(describeResponse(response), jsonReplacer, 2)}\n`);
}

/**
 * Sends the request on a ModelStreamInfer stream, half-closes it, and prints each response on
 * its own line as it arrives, until the server ends the stream. A response that carries an
 * error message is written to stderr and fails the command; the stream is still read to its end.
 * When stdout closes early (`| head`), the stream is cancelled and the command ends quietly.
 */
function inferStreaming(client: GRPCInferenceServiceClient, request: ModelInferRequest, deadline: number) {
  return new Promise<void>((resolve, reject) => {
    const stream = client.modelStreamInfer(new Metadata(), { deadline });
    let failure: string | undefined;
    let outputClosed = false;
    process.stdout.on("error", (error: NodeJS.ErrnoException) => {
      if (error.code !== "EPIPE") return reject(error);
      outputClosed = true;
      stream.cancel();
    });
    stream.on("data", (reply: ModelStreamInferResponse) => {
      if (outputClosed) return;
      if (reply.errorMessage !== "") {
        failure ??= reply.errorMessage;
        process.stderr.write(`infer failed: ${reply.errorMessage}\n`);
      } else if (reply.inferResponse !== undefined) {
        process.stdout.write(`${JSON.stringify(describeResponse(reply.inferResponse), jsonReplacer)}\n`);
      }
    });
    stream.on("error", (error) => (outputClosed ? resolve() : reject(error)));
    stream.on("end", () => {
      if (failure !== undefined) process.exitCode = 1;
      resolve();
    });
    stream.end(request);
  });
}

export function inferCommand(): Command {
  return new Command("infer")
    .description("Send one inference request to a KServe v2 gRPC server and print the reply")
    .argument("<model>", "model name")
    .addOption(
      commanderOption(text("--url <host:port>", { env: "DYNAMO_INFER_URL", help: "server address" }, "localhost:8001")),
    )
    .requiredOption("--input <NAME:DATATYPE:SHAPE=VALUES>", "an input tensor (repeatable)", parseInput)
    .option("--output <name>", "ask for this output only (repeatable)", (value: string, previous: string[] = []) => [
      ...previous,
      value,
    ])
    .option("--model-version <version>", "model version; empty: the latest", "")
    .option("--id <id>", "request id, echoed in the reply", "")
    .option("--timeout-secs <seconds>", "deadline", Number, 30)
    .option(
      "--stream",
      "call ModelStreamInfer, as decoupled models need (LLMs, repeat_int32): each response is printed as one line of JSON as it arrives",
      false,
    )
    .action(async (model: string, flags: InferFlags) => {
      const client = new GRPCInferenceServiceClient(flags.url, credentials.createInsecure());
      const request: ModelInferRequest = {
        modelName: model,
        modelVersion: flags.modelVersion,
        id: flags.id,
        parameters: {},
        inputs: flags.input,
        outputs: (flags.output ?? []).map((name) => ({ name, parameters: {} })),
        rawInputContents: [],
      };
      const deadline = Date.now() + flags.timeoutSecs * 1000;
      try {
        await (flags.stream ? inferStreaming : inferOnce)(client, request, deadline);
      } catch (error) {
        process.stderr.write(`infer failed: ${failureOf(error)}\n`);
        process.exitCode = 1;
      } finally {
        client.close();
      }
    });
}
