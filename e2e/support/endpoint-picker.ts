import { Client, credentials } from "@grpc/grpc-js";
import { BinaryReader, BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { TestCluster } from "../cluster/cluster.js";
import { Daemons, waitFor } from "../cluster/daemons.js";
import { binaryImage } from "../cluster/node.js";
import { EPP, LWEPP } from "./platform.js";
import { accepts, freePorts } from "./ports.js";

/**
 * An endpoint picker of the Gateway API Inference Extension, and the gateway's part of
 * talking to it. A gateway hands each request to its picker over Envoy's external
 * processing protocol (envoy.service.ext_proc.v3.ExternalProcessor/Process, a bidi stream):
 * the request's headers, then its body; the picker answers the headers with a header
 * mutation that sets `x-gateway-destination-endpoint` to the `ip:port` the gateway must send
 * the request to. Only the messages and fields this exchange uses are encoded here, by
 * their field numbers in Envoy's public API (ext_proc v3 and config.core.v3).
 */

/** The header an endpoint picker sets to the endpoint it chose (the Endpoint Picker protocol). */
export const DESTINATION_HEADER = "x-gateway-destination-endpoint";

/** One request as the gateway hands it to the picker. */
export interface PickedRequest {
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Uint8Array;
}

/** config.core.v3.HeaderValue { key = 1; value = 2; raw_value = 3 }, as a HeaderMap entry (headers = 1). */
function headerMap(headers: Readonly<Record<string, string>>): Uint8Array {
  const map = new BinaryWriter();
  for (const [key, value] of Object.entries(headers)) {
    map
      .tag(1, WireType.LengthDelimited)
      .bytes(
        new BinaryWriter()
          .tag(1, WireType.LengthDelimited)
          .string(key)
          .tag(3, WireType.LengthDelimited)
          .bytes(new TextEncoder().encode(value))
          .finish(),
      );
  }
  return map.finish();
}

/** ProcessingRequest { request_headers = 2: HttpHeaders { headers = 1; end_of_stream = 3 } }. */
function requestHeaders(headers: Readonly<Record<string, string>>, endOfStream: boolean): Buffer {
  const httpHeaders = new BinaryWriter().tag(1, WireType.LengthDelimited).bytes(headerMap(headers));
  if (endOfStream) httpHeaders.tag(3, WireType.Varint).bool(true);
  return Buffer.from(new BinaryWriter().tag(2, WireType.LengthDelimited).bytes(httpHeaders.finish()).finish());
}

/** ProcessingRequest { request_body = 4: HttpBody { body = 1; end_of_stream = 2 } }. */
function requestBody(body: Uint8Array): Buffer {
  const httpBody = new BinaryWriter()
    .tag(1, WireType.LengthDelimited)
    .bytes(body)
    .tag(2, WireType.Varint)
    .bool(true)
    .finish();
  return Buffer.from(new BinaryWriter().tag(4, WireType.LengthDelimited).bytes(httpBody).finish());
}

/** The length-delimited fields numbered `field` of a message. */
function fields(bytes: Uint8Array, field: number): Uint8Array[] {
  const reader = new BinaryReader(bytes);
  const found: Uint8Array[] = [];
  while (reader.pos < reader.len) {
    const [number, wireType] = reader.tag();
    if (number === field && wireType === WireType.LengthDelimited) found.push(reader.bytes());
    else reader.skip(wireType, number);
  }
  return found;
}

/**
 * The headers a ProcessingResponse to request headers sets: request_headers = 1 ->
 * HeadersResponse.response = 1 -> CommonResponse.header_mutation = 2 ->
 * HeaderMutation.set_headers = 1 -> HeaderValueOption.header = 1 -> HeaderValue. Undefined
 * for a response to anything else (the body).
 */
function setHeaders(response: Uint8Array): Record<string, string> | undefined {
  const [headersResponse] = fields(response, 1);
  if (headersResponse === undefined) return undefined;
  const set: Record<string, string> = {};
  for (const common of fields(headersResponse, 1))
    for (const mutation of fields(common, 2))
      for (const option of fields(mutation, 1))
        for (const header of fields(option, 1)) {
          const [key] = fields(header, 1);
          const [value] = fields(header, 2);
          const [raw] = fields(header, 3);
          if (key !== undefined) set[new TextDecoder().decode(key)] = new TextDecoder().decode(raw ?? value);
        }
  return set;
}

/** The gateway's side of ext_proc: asks the picker where one request goes. */
export class ExtProcGateway {
  private readonly client: Client;

  /**
   * `tls`: the picker serves ext_proc over TLS with a certificate it makes itself (GAIE's
   * default, --secure-serving), which a gateway takes without checking it; otherwise h2c.
   */
  constructor(address: string, options: { tls?: boolean } = {}) {
    this.client = new Client(
      address,
      options.tls === true
        ? credentials.createSsl(null, null, null, { rejectUnauthorized: false })
        : credentials.createInsecure(),
      // A name to send as SNI (an address is not one: RFC 6066); the certificate goes unchecked.
      options.tls === true ? { "grpc.ssl_target_name_override": "endpoint-picker" } : {},
    );
  }

  /** The headers the picker sets for this request (its headers, then its body, as a gateway sends them). */
  pick(request: PickedRequest): Promise<Record<string, string>> {
    const asIs = (bytes: Buffer): Buffer => bytes;
    const stream = this.client.makeBidiStreamRequest(
      "/envoy.service.ext_proc.v3.ExternalProcessor/Process",
      asIs,
      asIs,
    );
    return new Promise((resolve, reject) => {
      stream.on("data", (response: Buffer) => {
        const headers = setHeaders(response);
        if (headers === undefined) return;
        resolve(headers);
        stream.end();
      });
      stream.on("error", reject);
      stream.on("end", () => reject(new Error("the endpoint picker ended the stream without answering the headers")));
      stream.write(requestHeaders(request.headers, false));
      stream.write(requestBody(request.body));
    });
  }

  close(): void {
    this.client.close();
  }
}

/**
 * The image of GAIE's endpoint picker (epp) that a pool's `endpointPicker.image` names in the
 * tests: the binary e2e/platform/build.sh made from the pinned module, alone in an image, as
 * upstream's distroless one holds it (no registry is reachable to pull that one). Loaded into
 * the real node, the operator's picker Deployment runs it as real pods.
 */
export const endpointPickerImage = (cluster: Pick<TestCluster, "dir">): string =>
  binaryImage(EPP(), "epp", cluster.dir);

/**
 * An endpoint picker of the Gateway API Inference Extension, built by e2e/platform/build.sh,
 * run on this machine against the test cluster for one InferencePool: it watches the pool
 * and its pods through the API server and picks among the Ready ones: GAIE v1.6.0's
 * lightweight picker (lwepp), which goes round robin. (v1.4.0's full picker, epp, runs as the
 * operator's pods: endpointPickerImage.)
 */
export class EndpointPicker {
  private constructor(
    private readonly daemons: Daemons,
    private readonly name: string,
    readonly address: string,
  ) {}

  static async lwepp(cluster: Pick<TestCluster, "dir" | "adminKubeconfig">, pool: PoolName): Promise<EndpointPicker> {
    const name = "lwepp";
    const dir = join(cluster.dir, `${name}-${pool.name}`);
    mkdirSync(dir, { recursive: true });
    const [grpcPort, healthPort, metricsPort] = (await freePorts(3)) as [number, number, number];
    const daemons = new Daemons(dir);
    // It reads the cluster through controller-runtime, from the kubeconfig KUBECONFIG names.
    daemons.start(
      name,
      LWEPP(),
      [
        `--pool-name=${pool.name}`,
        `--pool-namespace=${pool.namespace}`,
        `--grpc-port=${grpcPort}`,
        `--grpc-health-port=${healthPort}`,
        `--metrics-port=${metricsPort}`,
        "--secure-serving=false",
      ],
      { KUBECONFIG: cluster.adminKubeconfig },
    );
    await waitFor(`${name}'s ext_proc port`, () => accepts(grpcPort));
    return new EndpointPicker(daemons, name, `127.0.0.1:${grpcPort}`);
  }

  stop(): Promise<void> {
    return this.daemons.stop(this.name);
  }
}

interface PoolName {
  readonly name: string;
  readonly namespace: string;
}
