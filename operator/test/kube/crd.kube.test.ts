import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT, type TestCluster } from "../../../e2e/cluster/cluster.js";
import { testCluster } from "../../../e2e/cluster/mocha-global.js";
import { IDENTITY_CONFIG, KubeTestClient } from "../fixtures/kube.js";

/** Specs the API server must refuse, each with the message a user would see. */
const INVALID_SPECS: [string, Record<string, unknown>, RegExp][] = [
  ["no modelConfig", {}, /spec\.modelConfig: Required value/],
  [
    "both configMapRef and inline",
    { modelConfig: { inline: IDENTITY_CONFIG, configMapRef: { name: "x" } } },
    /set exactly one of modelConfig\.configMapRef and modelConfig\.inline/,
  ],
  [
    "neither configMapRef nor inline",
    { modelConfig: {} },
    /set exactly one of modelConfig\.configMapRef and modelConfig\.inline/,
  ],
  [
    "the same gRPC and metrics port",
    { modelConfig: { inline: IDENTITY_CONFIG }, grpcPort: 9000, metricsPort: 9000 },
    /spec\.metricsPort: Invalid value: .*grpcPort and metricsPort must differ/,
  ],
  [
    "the same HTTP and gRPC port",
    { modelConfig: { inline: IDENTITY_CONFIG }, httpPort: 8001 },
    /spec\.httpPort: Invalid value: .*httpPort must differ from grpcPort and metricsPort/,
  ],
  [
    "an InferencePool protocol that is neither gRPC nor HTTP",
    {
      modelConfig: { inline: IDENTITY_CONFIG },
      inferencePool: { protocol: "h2", endpointPickerRef: { name: "epp", port: { number: 9002 } } },
    },
    /spec\.inferencePool\.protocol: Unsupported value: "h2": supported values: "gRPC", "HTTP"/,
  ],
  [
    "an InferencePool with both a picker of the user's and one the operator runs",
    {
      modelConfig: { inline: IDENTITY_CONFIG },
      inferencePool: { endpointPickerRef: { name: "epp", port: { number: 9002 } }, endpointPicker: {} },
    },
    /spec\.inferencePool: Invalid value: "object": set exactly one of endpointPickerRef/,
  ],
  [
    "an endpoint picker the operator runs for a gRPC pool (GAIE's epp reads OpenAI bodies)",
    { modelConfig: { inline: IDENTITY_CONFIG }, inferencePool: { endpointPicker: {} } },
    /spec\.inferencePool\.protocol: Invalid value: "object": endpointPicker runs GAIE's epp, which reads OpenAI JSON/,
  ],
  [
    "routes to a model whose ports speak TLS",
    {
      modelConfig: { inline: IDENTITY_CONFIG },
      tls: { mode: "SelfSigned" },
      routes: { gateway: { name: "gw" }, grpc: {} },
    },
    /spec\.routes: Invalid value: "object": routes carry cleartext to the model's pods/,
  ],
  [
    "a route path prefix the Gateway API refuses",
    { modelConfig: { inline: IDENTITY_CONFIG }, routes: { gateway: { name: "gw" }, http: { pathPrefix: "/v1//x" } } },
    /spec\.routes\.http\.pathPrefix: Invalid value: "string": pathPrefix must be a normalized path/,
  ],
  [
    "a listener name the Gateway API refuses",
    {
      modelConfig: { inline: IDENTITY_CONFIG },
      routes: { gateway: { name: "gw", sectionName: "GRPC_listener" }, grpc: {} },
    },
    /spec\.routes\.gateway\.sectionName: Invalid value: "GRPC_listener": spec\.routes\.gateway\.sectionName in body should match/,
  ],
  [
    "a canary without routes (its share is the routes' weight)",
    { modelConfig: { inline: IDENTITY_CONFIG }, canary: { trafficPercent: 10 } },
    /spec\.canary: Invalid value: "object": canary splits the routes' traffic by weight/,
  ],
  [
    "a canary whose routes go to the InferencePool (which selects the stable pods only)",
    {
      modelConfig: { inline: IDENTITY_CONFIG },
      inferencePool: { protocol: "HTTP" },
      routes: { gateway: { name: "gw" }, backend: "InferencePool", http: {} },
      canary: { trafficPercent: 10 },
    },
    /spec\.canary: Invalid value: "object": canary splits the routes' traffic by weight .* with backend Service/,
  ],
  [
    "a canary on a model that scales to zero",
    {
      modelConfig: { inline: IDENTITY_CONFIG },
      monitoring: {},
      autoscaling: { class: "KEDA", minReplicas: 0, maxReplicas: 2, targetWaitingRequests: 2 },
      routes: { gateway: { name: "gw" }, grpc: {} },
      canary: { trafficPercent: 10 },
    },
    /spec\.canary: Invalid value: "object": canary cannot be used with autoscaling\.minReplicas 0/,
  ],
  [
    "a canary beside replicas 0 (the stable share would go to no pod)",
    {
      modelConfig: { inline: IDENTITY_CONFIG },
      replicas: 0,
      routes: { gateway: { name: "gw" }, grpc: {} },
      canary: { trafficPercent: 10 },
    },
    /spec\.canary: Invalid value: "object": canary cannot be used with replicas 0/,
  ],
  [
    "pod labels of the operator's (they select the pods)",
    { modelConfig: { inline: IDENTITY_CONFIG }, pod: { labels: { team: "a", "dynamokserve.dev/canary-of": "other" } } },
    /spec\.pod\.labels: Invalid value: "object": pod\.labels cannot set the operator's labels/,
  ],
  [
    "canary model files from two sources",
    {
      modelConfig: { inline: IDENTITY_CONFIG },
      routes: { gateway: { name: "gw" }, grpc: {} },
      canary: {
        trafficPercent: 10,
        modelFiles: { storageUri: "s3://models/v2", persistentVolumeClaim: { claimName: "v2" } },
      },
    },
    /spec\.canary\.modelFiles: Invalid value: "object": set exactly one of canary\.modelFiles\.persistentVolumeClaim/,
  ],
  [
    "a canary share over 100 percent",
    {
      modelConfig: { inline: IDENTITY_CONFIG },
      routes: { gateway: { name: "gw" }, grpc: {} },
      canary: { trafficPercent: 101 },
    },
    /spec\.canary\.trafficPercent: Invalid value: 101: spec\.canary\.trafficPercent in body should be less than or equal to 100/,
  ],
  [
    "a canary config that is neither or both of a ConfigMap key and inline text",
    {
      modelConfig: { inline: IDENTITY_CONFIG },
      routes: { gateway: { name: "gw" }, grpc: {} },
      canary: { trafficPercent: 10, modelConfig: {} },
    },
    /spec\.canary\.modelConfig: Invalid value: "object": set exactly one of canary\.modelConfig\.configMapRef and canary\.modelConfig\.inline/,
  ],
  [
    "grpc and http routes whose hostnames meet (the Gateway API accepts only one of them)",
    {
      modelConfig: { inline: IDENTITY_CONFIG },
      routes: { gateway: { name: "gw" }, grpc: { hostnames: ["a.test"] }, http: { hostnames: ["b.test", "a.test"] } },
    },
    /spec\.routes: Invalid value: "object": grpc and http routes on one Gateway listener need hostnames of their own/,
  ],
  [
    "grpc and http routes without hostnames",
    { modelConfig: { inline: IDENTITY_CONFIG }, routes: { gateway: { name: "gw" }, grpc: {}, http: {} } },
    /grpc and http routes on one Gateway listener need hostnames of their own/,
  ],
  [
    "routes with neither grpc nor http",
    { modelConfig: { inline: IDENTITY_CONFIG }, routes: { gateway: { name: "gw" } } },
    /spec\.routes: Invalid value: "object": routes needs grpc, http or both/,
  ],
  [
    "routes to an InferencePool the model does not ask for",
    {
      modelConfig: { inline: IDENTITY_CONFIG },
      routes: { gateway: { name: "gw" }, backend: "InferencePool", grpc: {} },
    },
    /spec\.routes\.backend: Invalid value: "object": routes\.backend InferencePool routes to the model's InferencePool; set inferencePool/,
  ],
  [
    "a GRPCRoute to an HTTP InferencePool",
    {
      modelConfig: { inline: IDENTITY_CONFIG },
      inferencePool: { protocol: "HTTP", endpointPicker: {} },
      routes: { gateway: { name: "gw" }, backend: "InferencePool", grpc: {} },
    },
    /spec\.routes: Invalid value: "object": routes\.backend InferencePool carries only the pool's protocol/,
  ],
  [
    "an InferencePool with no endpoint picker",
    { modelConfig: { inline: IDENTITY_CONFIG }, inferencePool: { protocol: "HTTP" } },
    /spec\.inferencePool: Invalid value: "object": set exactly one of endpointPickerRef/,
  ],
  [
    "a port out of range",
    { modelConfig: { inline: IDENTITY_CONFIG }, grpcPort: 70000 },
    /spec\.grpcPort: Invalid value: 70000: spec\.grpcPort in body should be less than or equal to 65535/,
  ],
  [
    "negative replicas",
    { modelConfig: { inline: IDENTITY_CONFIG }, replicas: -1 },
    /spec\.replicas: Invalid value: -1: spec\.replicas in body should be greater than or equal to 0/,
  ],
  [
    "replicas beside autoscaling (the autoscaler owns the count)",
    {
      modelConfig: { inline: IDENTITY_CONFIG },
      replicas: 2,
      autoscaling: { maxReplicas: 4, targetInflightRequests: 4 },
    },
    /spec\.replicas: Invalid value: .*replicas cannot be set with autoscaling: the autoscaler owns the count/,
  ],
  [
    "autoscaling with more minReplicas than maxReplicas",
    {
      modelConfig: { inline: IDENTITY_CONFIG },
      autoscaling: { minReplicas: 5, maxReplicas: 4, targetInflightRequests: 4 },
    },
    /spec\.autoscaling\.minReplicas: Invalid value: .*minReplicas must not exceed maxReplicas/,
  ],
  [
    "autoscaling without a target",
    { modelConfig: { inline: IDENTITY_CONFIG }, autoscaling: { maxReplicas: 4 } },
    /spec\.autoscaling: Invalid value: .*set at least one target: targetInflightRequests, targetCPUUtilization/,
  ],
  [
    "a CPU utilization target without a CPU request",
    { modelConfig: { inline: IDENTITY_CONFIG }, autoscaling: { maxReplicas: 4, targetCPUUtilization: 70 } },
    /spec\.autoscaling\.targetCPUUtilization: Invalid value: .*needs resources\.requests\.cpu/,
  ],
  [
    "minReplicas 0 with the HPA class (an HPA cannot scale to zero)",
    {
      modelConfig: { inline: IDENTITY_CONFIG },
      autoscaling: { minReplicas: 0, maxReplicas: 2, targetInflightRequests: 4 },
    },
    /spec\.autoscaling\.minReplicas: Invalid value: .*minReplicas 0 needs class KEDA/,
  ],
  [
    "a KEDA-only target with the HPA class",
    { modelConfig: { inline: IDENTITY_CONFIG }, autoscaling: { maxReplicas: 2, targetWaitingRequests: 2 } },
    /spec\.autoscaling: Invalid value: .*targetWaitingRequests, targetRunningRequests and targetKvCacheUsagePercent need class\s+KEDA/,
  ],
  [
    "keda settings with the HPA class",
    {
      modelConfig: { inline: IDENTITY_CONFIG },
      autoscaling: { maxReplicas: 2, targetInflightRequests: 4, keda: { cooldownSeconds: 60 } },
    },
    /spec\.autoscaling\.keda: Invalid value: .*keda applies to class KEDA/,
  ],
  [
    "activation without minReplicas 0",
    {
      modelConfig: { inline: IDENTITY_CONFIG },
      monitoring: {},
      autoscaling: { class: "KEDA", maxReplicas: 2, targetInflightRequests: 4, activation: { holdTimeoutSeconds: 30 } },
    },
    /spec\.autoscaling\.activation: Invalid value: .*activation applies to minReplicas 0/,
  ],
  [
    "the KEDA class without monitoring (its triggers read what Prometheus scrapes)",
    {
      modelConfig: { inline: IDENTITY_CONFIG },
      autoscaling: { class: "KEDA", maxReplicas: 2, targetWaitingRequests: 2 },
    },
    /spec\.monitoring: Invalid value: .*autoscaling class KEDA reads the pods' series from Prometheus: set monitoring/,
  ],
  [
    "an unknown autoscaling class",
    {
      modelConfig: { inline: IDENTITY_CONFIG },
      autoscaling: { class: "Knative", maxReplicas: 2, targetInflightRequests: 4 },
    },
    /spec\.autoscaling\.class: Unsupported value: "Knative": supported values: "HPA", "KEDA"/,
  ],
  [
    "a KV-cache target above 100 percent",
    {
      modelConfig: { inline: IDENTITY_CONFIG },
      monitoring: {},
      autoscaling: { class: "KEDA", maxReplicas: 2, targetKvCacheUsagePercent: 120 },
    },
    /spec\.autoscaling\.targetKvCacheUsagePercent: Invalid value: 120: .*should be less than or equal to 100/,
  ],
  [
    "a Prometheus address that is not a URL",
    {
      modelConfig: { inline: IDENTITY_CONFIG },
      monitoring: {},
      autoscaling: {
        class: "KEDA",
        maxReplicas: 2,
        targetWaitingRequests: 2,
        keda: { prometheusAddress: "prometheus:9090" },
      },
    },
    /spec\.autoscaling\.keda\.prometheusAddress: Invalid value: "prometheus:9090": .*should match '\^https\?:\/\/'/,
  ],
  [
    "a model name with a slash",
    { modelName: "a/b", modelConfig: { inline: IDENTITY_CONFIG } },
    /spec\.modelName: Invalid value: "a\/b": spec\.modelName in body should match/,
  ],
  [
    "an unknown log level",
    { modelConfig: { inline: IDENTITY_CONFIG }, logLevel: "loud" },
    /spec\.logLevel: Unsupported value: "loud": supported values: "trace", "debug", "info", "warn", "error"/,
  ],
  [
    "an unknown pull policy",
    { modelConfig: { inline: IDENTITY_CONFIG }, imagePullPolicy: "Sometimes" },
    /spec\.imagePullPolicy: Unsupported value: "Sometimes"/,
  ],
  [
    "a bad resource quantity",
    { modelConfig: { inline: IDENTITY_CONFIG }, resources: { limits: { cpu: "lots" } } },
    /spec\.resources\.limits\.cpu: Invalid value: "lots"/,
  ],
  [
    "an empty configMapRef name",
    { modelConfig: { configMapRef: { name: "" } } },
    /spec\.modelConfig\.configMapRef\.name: Invalid value: "": spec\.modelConfig\.configMapRef\.name in body should be at least 1 chars long/,
  ],
];

describe("DynamoKserveModel CRD (real API server)", function () {
  this.timeout(30_000);
  let cluster: TestCluster;
  let namespace: string;

  before(async function () {
    cluster = testCluster(this);
    namespace = await new KubeTestClient(cluster.adminConfig()).createNamespace("crd");
  });

  const createRaw = (name: string, spec: Record<string, unknown>) =>
    cluster.request("POST", `/apis/dynamokserve.dev/v1alpha1/namespaces/${namespace}/dynamokservemodels`, {
      apiVersion: "dynamokserve.dev/v1alpha1",
      kind: "DynamoKserveModel",
      metadata: { name },
      spec,
    });

  for (const [what, spec, message] of INVALID_SPECS) {
    it(`rejects ${what}`, async () => {
      const response = await createRaw(`bad-${INVALID_SPECS.findIndex(([w]) => w === what)}`, spec);
      assert.equal(response.status, 422, response.body);
      assert.match((JSON.parse(response.body) as { message: string }).message, message);
    });
  }

  it("applies the schema's defaults", async () => {
    const response = await createRaw("defaults", { modelConfig: { configMapRef: { name: "cm" } } });
    assert.equal(response.status, 201, response.body);
    const { spec } = JSON.parse(response.body) as { spec: Record<string, unknown> };
    assert.deepEqual(spec, {
      modelConfig: { configMapRef: { name: "cm", key: "config.pbtxt" } },
      grpcPort: 8001,
      httpPort: 8000,
      metricsPort: 8002,
      logLevel: "info",
    });
  });

  it("accepts scale to zero with KEDA and fills in its defaults", async () => {
    const response = await createRaw("to-zero", {
      modelConfig: { configMapRef: { name: "cm" } },
      monitoring: {},
      autoscaling: { class: "KEDA", minReplicas: 0, maxReplicas: 3, targetWaitingRequests: 2 },
    });
    assert.equal(response.status, 201, response.body);
    const { spec } = JSON.parse(response.body) as { spec: { autoscaling: Record<string, unknown> } };
    assert.deepEqual(spec.autoscaling, {
      class: "KEDA",
      minReplicas: 0,
      maxReplicas: 3,
      targetWaitingRequests: 2,
      inflightMetric: "dynamo_frontend_inflight_requests",
    });
  });

  it("teaches the API through kubectl explain and answers to the short name dkm", () => {
    const explained = cluster.kubectl("explain", "dkm.spec.modelConfig").replace(/\s+/g, " ");
    assert.match(explained, /KIND: DynamoKserveModel/);
    assert.match(
      explained,
      /Where the model's Triton configuration \(triton_model_config, a config\.pbtxt\) comes from/,
    );
    assert.match(explained, /configMapRef <Object>/);
    const table = cluster.kubectl("get", "dkm", "-n", namespace, "defaults");
    assert.match(table.split("\n")[0] ?? "", /^NAME\s+READY\s+MODEL\s+BACKEND\s+ENDPOINT\s+AUTOSCALER\s+AGE$/);
  });

  it("accepts the example model a newcomer applies", () => {
    const example = join(REPO_ROOT, "examples", "models", "identity-fp32.yaml");
    const output = cluster.kubectl("apply", "--dry-run=server", "-n", namespace, "-f", example);
    assert.match(output, /dynamokservemodel\.dynamokserve\.dev\/identity-fp32 created \(server dry run\)/);
  });

  it("accepts every example model the guides apply", () => {
    for (const name of readdirSync(join(REPO_ROOT, "examples", "models")).filter((file) => file.endsWith(".yaml"))) {
      const output = cluster.kubectl(
        "apply",
        "--dry-run=server",
        "-n",
        namespace,
        "-f",
        join(REPO_ROOT, "examples", "models", name),
      );
      assert.match(
        output,
        new RegExp(`dynamokservemodel\\.dynamokserve\\.dev/${name.replace(".yaml", "")} created \\(server dry run\\)`),
      );
    }
  });

  it("publishes a description for every field (what kubectl explain shows)", async () => {
    const response = await cluster.request(
      "GET",
      "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/dynamokservemodels.dynamokserve.dev",
    );
    const crd = JSON.parse(response.body) as { spec: { versions: { schema: { openAPIV3Schema: Schema } }[] } };
    const missing: string[] = [];
    const walk = (schema: Schema, path: string): void => {
      for (const [name, property] of Object.entries(schema.properties ?? {})) {
        if (path === "" && name === "metadata") continue;
        if (!property.description) missing.push(`${path}${name}`);
        walk(property, `${path}${name}.`);
        if (property.items !== undefined) walk(property.items, `${path}${name}[].`);
      }
    };
    walk(crd.spec.versions[0]!.schema.openAPIV3Schema, "");
    assert.deepEqual(missing, []);
  });
});

interface Schema {
  description?: string;
  properties?: Record<string, Schema>;
  items?: Schema;
}
