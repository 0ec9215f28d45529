import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { chmodSync, copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { credentials } from "@grpc/grpc-js";
import { GenericContainer, Wait, type StartedTestContainer } from "testcontainers";
import { GRPCInferenceServiceClient } from "../../proto/gen/ts/grpc_service.js";
import { call, infer, streamAll } from "../../dataplane/test/fixtures/server.js";
import { identityRequest, promptRequest } from "../../dataplane/test/fixtures/requests.js";
import { HealthTestClient } from "../../dataplane/test/fixtures/health.js";
import { EXAMPLES } from "../../dataplane/test/fixtures/paths.js";
import { eventually } from "../support/eventually.js";
import { buildImage, requireDocker } from "../support/image.js";
import { majorOf, PINNED_NODE } from "../support/node-version.js";
import { scrape, valueOf } from "../support/prometheus.js";

const GRPC_PORT = 8001;
const METRICS_PORT = 8002;
const HTTP_PORT = 8000;

/** What the operator's pod securityContext asks of the runtime, in Docker's terms. */
class PodLikeContainer extends GenericContainer {
  withReadOnlyRootFilesystem(): this {
    this.hostConfig.ReadonlyRootfs = true;
    return this;
  }
}

/**
 * The image as the operator runs it: a ConfigMap-like folder of `<model>.pbtxt` files
 * mounted read-only at /models, the operator's arguments, the pod's securityContext
 * (non-root uid 65532 from the image, read-only root, an emptyDir-like /tmp, no
 * capabilities, no privilege escalation).
 */
describe("the dynamo-kserve image (Dockerfile, run with testcontainers)", function () {
  this.timeout(600_000);
  let configMap: string;
  let container: StartedTestContainer;
  let client: GRPCInferenceServiceClient;
  let health: HealthTestClient;
  const logs: string[] = [];

  before(async function () {
    requireDocker(this);
    const image = buildImage();
    configMap = mkdtempSync(join(tmpdir(), "dynamo-kserve-configmap-"));
    chmodSync(configMap, 0o755);
    for (const model of ["identity_fp32", "mock_llm"]) {
      copyFileSync(join(EXAMPLES, model, "config.pbtxt"), join(configMap, `${model}.pbtxt`));
      chmodSync(join(configMap, `${model}.pbtxt`), 0o644);
    }
    container = await new PodLikeContainer(image)
      .withCommand([
        "dataplane",
        "--model-repository",
        "/models",
        "--grpc-port",
        String(GRPC_PORT),
        "--metrics-port",
        String(METRICS_PORT),
        "--repository-poll-secs",
        "0.5",
        "--drain-delay-secs",
        "0.5",
      ])
      .withBindMounts([{ source: configMap, target: "/models", mode: "ro" }])
      .withTmpFs({ "/tmp": "rw" })
      .withReadOnlyRootFilesystem()
      .withDroppedCapabilities("ALL")
      .withSecurityOpt("no-new-privileges")
      .withExposedPorts(GRPC_PORT, HTTP_PORT, METRICS_PORT)
      .withWaitStrategy(Wait.forHttp("/v2/health/ready", METRICS_PORT).forStatusCode(200))
      .withLogConsumer((stream) => stream.on("data", (line: Buffer | string) => logs.push(String(line))))
      .withStartupTimeout(60_000)
      .start();
    const address = `${container.getHost()}:${container.getMappedPort(GRPC_PORT)}`;
    client = new GRPCInferenceServiceClient(address, credentials.createInsecure());
    health = new HealthTestClient(address);
  });

  after(async () => {
    client?.close();
    health?.close();
    await container?.stop({ timeout: 5_000 }).catch(() => undefined);
    if (configMap !== undefined) rmSync(configMap, { recursive: true, force: true });
  });

  it("runs as uid 65532 on a read-only root filesystem", async () => {
    const uid = await container.exec(["node", "-p", "process.getuid() + ':' + process.getgid()"]);
    assert.equal(uid.output.trim(), "65532:65532");
    const write = await container.exec(["node", "-e", "require('fs').writeFileSync('/app/x', 'x')"]);
    assert.notEqual(write.exitCode, 0);
    assert.match(write.output, /EROFS|read-only file system/);
  });

  it("runs the pinned Node major, on which onnxruntime-node's native binding loads a model", async () => {
    const version = await container.exec(["node", "-p", "process.versions.node"]);
    assert.equal(majorOf(version.output.trim()), majorOf(PINNED_NODE), `the image's Node is ${version.output}`);
    const session = await container.exec([
      "node",
      "-e",
      "require('/app/node_modules/onnxruntime-node').InferenceSession.create(" +
        "'/app/examples/model_repository/add_sub_onnx/1/model.onnx').then((s) => console.log(s.inputNames.join()))",
    ]);
    assert.equal(session.exitCode, 0, session.output);
    // The last line: onnxruntime logs its own warnings first (its telemetry finds no CA bundle).
    assert.equal(session.output.trim().split("\n").at(-1), "INPUT0,INPUT1", session.output);
  });

  it("serves the mounted models over gRPC: inference, health, and a ConfigMap update", async () => {
    const index = await call(client, "repositoryIndex", { repositoryName: "", ready: true });
    assert.deepEqual(index.models.map((model) => model.name).sort(), ["identity_fp32", "mock_llm"]);
    const reply = await infer(client, identityRequest({ batch: 2, width: 3 }));
    assert.deepEqual(reply.outputs[0]?.shape, [2n, 3n]);
    assert.equal(reply.rawOutputContents[0]?.length, 24);
    assert.equal(await health.check(""), "SERVING");
    assert.equal(await health.check("identity_fp32"), "SERVING");
    const tokens = await streamAll(client, [promptRequest({ maxTokens: 3 })]);
    assert.equal(tokens.filter((reply) => reply.errorMessage === "").length, 3);
    // The kubelet swaps a ConfigMap's files in place; a new key becomes a new model.
    copyFileSync(join(EXAMPLES, "identity_int32", "config.pbtxt"), join(configMap, "identity_int32.pbtxt"));
    chmodSync(join(configMap, "identity_int32.pbtxt"), 0o644);
    await eventually(async () => assert.equal(await health.check("identity_int32"), "SERVING"), 20_000);
  });

  it("serves OpenAI chat on its default HTTP port (8000) from the read-only image", async () => {
    const base = `http://${container.getHost()}:${container.getMappedPort(HTTP_PORT)}`;
    const reply = await fetch(`${base}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "mock_llm", messages: [{ role: "user", content: "hi" }], max_tokens: 2 }),
    });
    assert.equal(reply.status, 200);
    const chat = (await reply.json()) as { choices: { message: { content: string } }[] };
    assert.equal(chat.choices[0]?.message.content.split(" ").length, 2);
  });

  it("exposes Prometheus metrics for the inference it served", async () => {
    const samples = await scrape(`http://${container.getHost()}:${container.getMappedPort(METRICS_PORT)}/metrics`);
    assert.equal(valueOf(samples, "nv_inference_request_success", { model: "identity_fp32", version: "1" }), 1);
    assert.equal(valueOf(samples, "dynamo_frontend_output_sequence_tokens_sum", { model: "mock_llm" }), 3);
    assert.equal(
      valueOf(samples, "dynamo_frontend_requests_total", {
        model: "mock_llm",
        endpoint: "chat_completions",
        status: "success",
      }),
      1,
    );
  });

  it("drains on SIGTERM: the stream in flight finishes and the process exits 0", async () => {
    const inFlight = streamAll(client, [promptRequest({ maxTokens: 40 })]);
    await new Promise((resolve) => setTimeout(resolve, 150));
    const stopped = await container.stop({ timeout: 20_000, remove: false });
    const replies = await inFlight.catch((error: unknown) => {
      throw new Error(`${String(error)}; container logs:\n${logs.join("")}`);
    });
    assert.equal(replies.filter((reply) => reply.errorMessage === "").length, 40);
    const exitCode = execFileSync("docker", ["inspect", "--format", "{{.State.ExitCode}}", stopped.getId()], {
      encoding: "utf8",
    }).trim();
    execFileSync("docker", ["rm", "--force", stopped.getId()]);
    assert.equal(exitCode, "0", logs.join(""));
    assert.ok(
      logs.some((line) => line.includes('"signal":"SIGTERM"')),
      "the data plane logged the signal it stopped on",
    );
  });
});
