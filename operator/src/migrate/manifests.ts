import type { V1ConfigMap, V1ObjectMeta } from "@kubernetes/client-node";
import { stringify } from "yaml";
import { formatText } from "../../../lib/model-repository/config.js";
import type { DynamoKserveModel } from "../api/v1alpha1.js";
import { folderUri, type ModelFilesSource, type ModelPlan } from "./plan.js";

/** Pure builders: a migration plan in, the Kubernetes objects that serve each model out. */

type PlannedModel = Extract<ModelPlan, { ok: true }>;
/** A model as YAML to apply: no uid yet, and the namespace may be left to kubectl. */
type MigratedModel = Omit<DynamoKserveModel, "metadata" | "status"> & { metadata: V1ObjectMeta };
export type MigratedObject = V1ConfigMap | MigratedModel;

/** The ConfigMap key holding a migrated config.pbtxt. */
const CONFIG_KEY = "config.pbtxt";
/** A model's Service is named like it: a DNS-1123 label of at most 63 characters. */
const MAX_NAME = 63;

/**
 * A DNS-1123 label for a Triton model name: lowercase, `_` and other characters become `-`
 * (`densenet_onnx` -> `densenet-onnx`); the model keeps its own name as spec.modelName.
 */
export function kubernetesName(model: string): string {
  const cleaned = model
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, "-")
    .slice(0, MAX_NAME)
    .replace(/^-+|-+$/g, "");
  return cleaned === "" ? "model" : cleaned;
}

/**
 * The objects for one model: a ConfigMap with its normalized config.pbtxt, for ONNX models
 * shipped in a ConfigMap one more with the files, and the DynamoKserveModel (its files, if
 * any, from the ConfigMap, the claim, or the model's folder in object storage).
 */
export function migratedObjects(
  plan: PlannedModel,
  namespace: string | undefined,
  filesSource: ModelFilesSource,
): MigratedObject[] {
  const name = kubernetesName(plan.model);
  const metadata = (objectName: string) => ({
    name: objectName,
    ...(namespace !== undefined ? { namespace } : {}),
    labels: { "app.kubernetes.io/part-of": "dynamo-kserve", "dynamokserve.dev/migrated-from": "triton" },
  });
  const configMap: V1ConfigMap = {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: metadata(`${name}-triton-config`),
    data: { [CONFIG_KEY]: formatText(plan.config) },
  };
  const objects: MigratedObject[] = [configMap];
  let modelFiles: DynamoKserveModel["spec"]["modelFiles"];
  if (plan.modelFiles !== undefined && plan.modelFiles.files !== undefined) {
    const filesMap: V1ConfigMap = {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: metadata(`${name}-model-files`),
      binaryData: Object.fromEntries(
        plan.modelFiles.files.map((file) => [fileKey(file.path), Buffer.from(file.content).toString("base64")]),
      ),
    };
    objects.push(filesMap);
    modelFiles = {
      configMap: {
        name: filesMap.metadata!.name!,
        items: nonEmpty(plan.modelFiles.files.map((file) => ({ key: fileKey(file.path), path: file.path }))),
      },
    };
  } else if (plan.modelFiles !== undefined && filesSource.kind === "persistentVolumeClaim") {
    modelFiles = {
      persistentVolumeClaim: { claimName: filesSource.claimName },
      ...(plan.modelFiles.folder !== "" ? { subPath: plan.modelFiles.folder } : {}),
    };
  } else if (plan.modelFiles !== undefined && filesSource.kind === "storage") {
    modelFiles = { storageUri: folderUri(filesSource.uri, plan.modelFiles.folder) };
  }
  // The bucket's credentials go with the files that need them (spec.storage only beside a storageUri).
  const storage =
    modelFiles?.storageUri !== undefined && filesSource.kind === "storage" && filesSource.secretName !== undefined
      ? { secretName: filesSource.secretName }
      : undefined;
  const model: MigratedModel = {
    apiVersion: "dynamokserve.dev/v1alpha1",
    kind: "DynamoKserveModel",
    metadata: metadata(name),
    spec: {
      ...(name !== plan.model ? { modelName: plan.model } : {}),
      replicas: 1,
      modelConfig: { configMapRef: { name: configMap.metadata!.name!, key: CONFIG_KEY } },
      ...(modelFiles !== undefined ? { modelFiles } : {}),
      ...(storage !== undefined ? { storage } : {}),
    },
  };
  objects.push(model);
  return objects;
}

function nonEmpty<T>(items: readonly T[]): [T, ...T[]] {
  const [first, ...rest] = items;
  if (first === undefined) throw new Error("a model to ship in a ConfigMap has no files");
  return [first, ...rest];
}

/** A ConfigMap key for a file path (keys may not hold "/"): 1/model.onnx -> 1_model.onnx. */
const fileKey = (path: string): string => path.replaceAll("/", "_");

/** Objects as one multi-document YAML stream, ready for `kubectl apply -f -`. */
export function toYaml(objects: readonly MigratedObject[]): string {
  return objects.map((object) => `---\n${stringify(object, { lineWidth: 0 })}`).join("");
}
