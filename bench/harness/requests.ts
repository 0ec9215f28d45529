import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { ModelInferRequest } from "../../proto/gen/ts/grpc_service.js";
import { joinBytesElements } from "../../dataplane/src/tensors/bytes.js";

/** What a scenario sends: one ModelInfer request, encoded once and replayed by the load generator. */
export type Payload =
  | { readonly kind: "fp32"; readonly elements: number }
  | { readonly kind: "bytes"; readonly elements: number; readonly elementBytes: number };

/** Bytes of tensor data a request carries (and an identity model sends back). */
export function payloadBytes(payload: Payload): number {
  return payload.kind === "fp32" ? 4 * payload.elements : payload.elements * (4 + payload.elementBytes);
}

export const modelFor = (payload: Payload): string => (payload.kind === "fp32" ? "identity_fp32" : "identity_bytes");

/** The request as protobuf bytes: INPUT0 of shape [1, elements] in raw_input_contents. */
export function encodeRequest(payload: Payload): Uint8Array {
  const raw =
    payload.kind === "fp32"
      ? new Uint8Array(Float32Array.from({ length: payload.elements }, (_, i) => i).buffer)
      : joinBytesElements(
          Array.from({ length: payload.elements }, () => new Uint8Array(payload.elementBytes).fill(0x61)),
        );
  return ModelInferRequest.encode({
    modelName: modelFor(payload),
    modelVersion: "",
    id: "",
    parameters: {},
    inputs: [
      {
        name: "INPUT0",
        datatype: payload.kind === "fp32" ? "FP32" : "BYTES",
        shape: [1n, BigInt(payload.elements)],
        parameters: {},
        contents: undefined,
      },
    ],
    outputs: [],
    rawInputContents: [raw],
  }).finish();
}

/** A KServe v2 REST infer request: the body's file and its headers. */
export interface HttpRequest {
  readonly path: string;
  readonly bodyFile: string;
  readonly headers: Readonly<Record<string, string>>;
}

/**
 * The same request for the REST endpoint: JSON `data`, or Triton's binary tensor data
 * extension (the JSON header, then the raw tensor; the reply's outputs binary too).
 */
export function writeHttpRequest(dir: string, id: string, payload: Payload, form: "json" | "binary"): HttpRequest {
  if (payload.kind !== "fp32") throw new Error("the REST scenarios send FP32 tensors");
  const input = { name: "INPUT0", datatype: "FP32", shape: [1, payload.elements] };
  const data = Array.from({ length: payload.elements }, (_, i) => i);
  const bodyFile = join(dir, `${id}.body`);
  const path = `/v2/models/${modelFor(payload)}/infer`;
  if (form === "json") {
    writeFileSync(bodyFile, JSON.stringify({ inputs: [{ ...input, data }] }));
    return { path, bodyFile, headers: { "Content-Type": "application/json" } };
  }
  const header = Buffer.from(
    JSON.stringify({
      inputs: [{ ...input, parameters: { binary_data_size: 4 * payload.elements } }],
      parameters: { binary_data_output: true },
    }),
  );
  writeFileSync(bodyFile, Buffer.concat([header, Buffer.from(Float32Array.from(data).buffer)]));
  return {
    path,
    bodyFile,
    headers: { "Content-Type": "application/octet-stream", "Inference-Header-Content-Length": String(header.length) },
  };
}

/** Writes the encoded request where ghz reads it (--binary-file); returns the path. */
export function writeRequest(dir: string, id: string, payload: Payload): string {
  const file = join(dir, `${id}.bin`);
  writeFileSync(file, encodeRequest(payload));
  return file;
}
