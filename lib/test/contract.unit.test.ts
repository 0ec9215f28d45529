import assert from "node:assert/strict";
import { dataPlaneArguments, type DataPlaneArguments } from "../contract/dataplane.js";
import { modelFilesArgument, parseModelFilesArgument, parseTokenFile } from "../contract/layout.js";
import { parsedDataPlaneArguments } from "../../cli/dataplane.js";

/** Every data-plane option set to a value other than its default (a new option must be added here). */
const EVERY_OPTION: Required<DataPlaneArguments> = {
  modelRepository: ["/models", "/repository"],
  modelConfig: ["/etc/one.pbtxt"],
  modelFilesRoot: "/model-files",
  forwardUnsupported: "triton.ml.svc:8001",
  forwardPython: true,
  allowClientShm: true,
  python: "/opt/venv/bin/python",
  pythonStubTimeoutSecs: 12,
  pythonShmByteSize: 1_048_576,
  modelCacheDir: "/var/cache/dynamo-kserve/models",
  modelCacheMaxBytes: 10_737_418_240,
  storageSecretDir: "/var/run/secrets/dynamo-kserve/storage",
  storageCaFile: "/etc/storage-ca/ca.crt",
  s3Endpoint: "https://minio.storage.svc:9000",
  s3Region: "eu-west-1",
  s3PathStyle: true,
  gcsEndpoint: "http://fake-gcs:4443",
  azureEndpoint: "http://azurite:10000/{account}",
  modelFiles: ["densenet_onnx=s3://models/triton/densenet_onnx", "add_sub=/srv/add_sub"],
  modelLoadPath: ["s3://models/extra", "/srv/more-models"],
  modelControlMode: "explicit",
  loadModel: ["a", "b"],
  modelLoadTimeoutSecs: 90,
  repositoryPollSecs: 0.2,
  disableAutoCompleteConfig: true,
  host: "127.0.0.1",
  grpcPort: 9001,
  httpPort: 9000,
  metricsPort: 9002,
  maxMessageSize: 1_048_576,
  streamMaxPending: 64,
  shutdownGraceSecs: 7,
  grpcWorkers: 3,
  drainDelaySecs: 1.5,
  grpcKeepaliveTimeSecs: 30,
  grpcKeepaliveTimeoutSecs: 5,
  grpcMaxConnectionAgeSecs: 600,
  grpcMaxConnectionAgeGraceSecs: 30,
  grpcMaxConnectionIdleSecs: 120,
  grpcHttp2MaxPingsWithoutData: 2,
  grpcHttp2MinTimeBetweenPingsSecs: 10,
  grpcKeepalivePermitWithoutCalls: true,
  grpcHttp2MinPingIntervalWithoutDataSecs: 10,
  grpcHttp2MaxPingStrikes: 2,
  grpcMaxConcurrentStreams: 100,
  grpcInitialConnectionWindowSize: 1_048_576,
  grpcInitialStreamWindowSize: 262_144,
  upstreamFlowControlWindow: 2_097_152,
  kserveMode: true,
  serverName: "triton",
  variant: "canary",
  useTls: true,
  certFile: "/tls/tls.crt",
  keyFile: "/tls/tls.key",
  clientCaFile: "/tls/ca.crt",
  authTokenFile: "/auth/tokens",
  modelControlTokenFile: "/auth/model-control",
  credentialsReloadSecs: 3,
  otlpTracesEndpoint: "http://collector:4318/v1/traces",
  otelServiceName: "dataplane-a",
  traceSampleRatio: 0.25,
  logLevel: "debug",
};

describe("the data plane's contract (lib/contract)", () => {
  it("round-trips: the arguments built from typed options parse back to the same options", async () => {
    const args = dataPlaneArguments(EVERY_OPTION);
    assert.deepEqual({ ...(await parsedDataPlaneArguments(args)) }, EVERY_OPTION);
  });

  it("builds only what is set; the rest are the data plane's defaults", async () => {
    const args = dataPlaneArguments({ modelRepository: ["/models"], grpcPort: 8001, useTls: false });
    assert.deepEqual(args, ["--model-repository", "/models", "--grpc-port", "8001"]);
    const options = await parsedDataPlaneArguments(args);
    assert.equal(options.maxMessageSize, 64 * 1024 * 1024);
    assert.equal(options.modelControlMode, "poll");
    assert.equal(options.useTls, undefined);
  });

  it("reads --allow-client-shm as Triton's users write it (=true, =false), and its variable set to false as off", async () => {
    const allowed = async (args: string[]): Promise<boolean | undefined> =>
      (await parsedDataPlaneArguments(args)).allowClientShm;
    assert.equal(await allowed(["--allow-client-shm"]), true);
    assert.equal(await allowed(["--allow-client-shm=true"]), true);
    assert.equal(await allowed(["--allow-client-shm=false"]), false);
    assert.equal(await allowed(["--allow-client-shm", "--grpc-port", "9001"]), true);
    await assert.rejects(parsedDataPlaneArguments(["--allow-client-shm=maybe"]), /expected true or false, got 'maybe'/);
    const saved = process.env["DYNAMO_ALLOW_CLIENT_SHM"];
    try {
      process.env["DYNAMO_ALLOW_CLIENT_SHM"] = "false";
      assert.equal(await allowed([]), false);
      process.env["DYNAMO_ALLOW_CLIENT_SHM"] = "true";
      assert.equal(await allowed([]), true);
    } finally {
      if (saved === undefined) delete process.env["DYNAMO_ALLOW_CLIENT_SHM"];
      else process.env["DYNAMO_ALLOW_CLIENT_SHM"] = saved;
    }
  });

  it("reads a token file as the data plane and the operator both do: one per line, no blanks or comments", () => {
    assert.deepEqual(parseTokenFile("# rotated 2026-11\n\n  alpha  \r\nbeta\n#gamma\n"), ["alpha", "beta"]);
  });

  it("writes and reads --model-files as <model>=<location>, the location's own '=' kept", () => {
    const value = { model: "densenet_onnx", location: "s3://host:9000/models/a=b/densenet_onnx" };
    assert.equal(modelFilesArgument(value), "densenet_onnx=s3://host:9000/models/a=b/densenet_onnx");
    assert.deepEqual(parseModelFilesArgument(modelFilesArgument(value)), value);
    for (const bad of ["densenet", "=s3://b/p", "densenet="]) assert.equal(parseModelFilesArgument(bad), undefined);
  });
});
