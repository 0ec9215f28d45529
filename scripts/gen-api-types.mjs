#!/usr/bin/env node
// Generates operator/src/api/*.generated.ts from the CRDs in crds/ (the source of truth):
// TypeScript types for spec and status, and the schema's defaults as constants.
// With --check, fails if the checked-in file differs.
import { lstatSync, readdirSync, readFileSync, realpathSync } from "node:fs";
import { basename, join } from "node:path";
import { compile } from "json-schema-to-typescript";
import { parse } from "yaml";
import { syncGenerated } from "./lib/generated.mjs";

const root = new URL("..", import.meta.url).pathname;

/** Each CRD in crds/ and the file its types go to (the API's kinds, one file each). */
const CRDS = [
  { crdFile: "crds/dynamokserve.dev_dynamokservemodels.yaml", out: "v1alpha1.generated.ts" },
  { crdFile: "crds/dynamokserve.dev_dynamokserverepositories.yaml", out: "repository.v1alpha1.generated.ts" },
];

/**
 * Kubernetes' OpenAPI dialect -> plain JSON Schema: drop x-kubernetes-* and CEL; an object
 * that keeps unknown fields (a Kubernetes type the CRD leaves open) becomes a map of unknowns.
 */
function plain(node) {
  if (Array.isArray(node)) return node.map(plain);
  if (node === null || typeof node !== "object") return node;
  const open = node["x-kubernetes-preserve-unknown-fields"] === true && node.additionalProperties === undefined;
  return Object.fromEntries([
    ...Object.entries(node)
      .filter(([key]) => !key.startsWith("x-kubernetes-"))
      .map(([key, value]) => [key, key === "properties" ? mapValues(value, plain) : plain(value)]),
    ...(open ? [["additionalProperties", true]] : []),
  ]);
}
const mapValues = (object, fn) => Object.fromEntries(Object.entries(object).map(([k, v]) => [k, fn(v)]));

/** The `default` of every property, nested objects included, as one object. */
function defaultsOf(node) {
  const result = {};
  for (const [key, property] of Object.entries(node.properties ?? {})) {
    if (property.default !== undefined) result[key] = property.default;
    else if (property.type === "object" && property.properties) {
      const nested = defaultsOf(property);
      if (Object.keys(nested).length > 0) result[key] = nested;
    }
  }
  return result;
}

const options = { additionalProperties: false, bannerComment: "", format: true, strictIndexSignatures: true };

/** The TypeScript of one CRD: its names, its spec defaults, and types for spec and status. */
async function typesOf(crdFile) {
  const crd = parse(readFileSync(join(root, crdFile), "utf8"));
  const version = crd.spec.versions.find((candidate) => candidate.storage);
  const schema = version.schema.openAPIV3Schema;
  const kind = crd.spec.names.kind;
  const spec = await compile({ ...plain(schema.properties.spec), title: `${kind}Spec` }, "Spec", options);
  const status = await compile({ ...plain(schema.properties.status), title: `${kind}Status` }, "Status", options);
  return [
    `// Generated from ${crdFile} by scripts/gen-api-types.mjs. DO NOT EDIT: change the CRD and run \`npm run api:gen\`.`,
    "",
    `export const GROUP = ${JSON.stringify(crd.spec.group)};`,
    `export const VERSION = ${JSON.stringify(version.name)};`,
    `export const KIND = ${JSON.stringify(kind)};`,
    `export const PLURAL = ${JSON.stringify(crd.spec.names.plural)};`,
    "",
    "/** Defaults the API server applies (from the schema's `default` values). */",
    `export const SPEC_DEFAULTS = ${JSON.stringify(defaultsOf(schema.properties.spec))} as const;`,
    "",
    spec.trim(),
    "",
    status.trim(),
    "",
  ].join("\n");
}

/**
 * The Helm chart installs the same CRDs: its crds/ holds a link to each file of crds/ (and
 * nothing else), so the two can never say different things.
 */
function checkChartCrds() {
  const chartCrds = join(root, "helm", "dynamo-kserve", "crds");
  const expected = CRDS.map(({ crdFile }) => basename(crdFile)).sort();
  const found = readdirSync(chartCrds).sort();
  const problems = [];
  if (JSON.stringify(found) !== JSON.stringify(expected)) {
    problems.push(`helm/dynamo-kserve/crds holds ${found.join(", ")}; expected ${expected.join(", ")}`);
  }
  for (const name of found) {
    const path = join(chartCrds, name);
    if (!lstatSync(path).isSymbolicLink() || realpathSync(path) !== realpathSync(join(root, "crds", name))) {
      problems.push(`helm/dynamo-kserve/crds/${name} is not a link to crds/${name}`);
    }
  }
  if (problems.length > 0) {
    console.error(`api: ${problems.join("; ")}`);
    process.exit(1);
  }
}

checkChartCrds();
const files = new Map();
for (const { crdFile, out } of CRDS) files.set(out, await typesOf(crdFile));
syncGenerated({
  label: "api",
  dir: join(root, "operator", "src", "api"),
  files,
  check: process.argv.includes("--check"),
  owned: (file) => file.endsWith(".generated.ts"),
});
