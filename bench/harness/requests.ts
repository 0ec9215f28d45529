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

/** Writes the encoded request where ghz reads it (--binary-file); returns the path. */
export function writeRequest(dir: string, id: string, payload: Payload): string {
  const file = join(dir, `${id}.bin`);
  writeFileSync(file, encodeRequest(payload));
  return file;
}
