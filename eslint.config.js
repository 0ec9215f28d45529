import js from "@eslint/js";
import tseslint from "typescript-eslint";

/** Rooms talk downward only (ARCHITECTURE.md): what each may not import. */
const forbidden = (message, ...groups) => ({
  "no-restricted-imports": ["error", { patterns: [{ group: groups, message }] }],
});

export default tseslint.config(
  { ignores: ["dist/", "coverage/", "node_modules/", "proto/gen/"] },
  js.configs.recommended,
  ...tseslint.configs.strict,
  {
    files: ["**/*.ts"],
    rules: {
      "@typescript-eslint/no-explicit-any": "error",
      "@typescript-eslint/no-non-null-assertion": "off",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
    },
  },
  {
    files: ["operator/src/**/*.ts"],
    rules: forbidden(
      "the operator never imports the data plane's runtime, the activator, the CLI or tools/: what they share is in lib/",
      "**/dataplane/**",
      "**/activator/**",
      "**/cli/**",
      "**/tools/**",
    ),
  },
  {
    files: ["lib/**/*.ts"],
    ignores: ["lib/test/**"],
    rules: forbidden(
      "lib/ is what the data plane, the operator and the CLI share: it loads no runtime and imports none of them (nor tools/)",
      "**/dataplane/**",
      "**/operator/**",
      "**/activator/**",
      "**/cli/**",
      "onnxruntime-node",
      "@kubernetes/client-node",
      "**/tools/**",
    ),
  },
  {
    files: ["dataplane/src/**/*.ts"],
    rules: forbidden(
      "the data plane imports neither the operator, the activator, the CLI nor tools/",
      "**/operator/**",
      "**/activator/**",
      "**/cli/**",
      "**/tools/**",
    ),
  },
  {
    // Below the servers: engines, models, tensors and the pipeline serve every front door, so
    // they import none (nor what the whole data plane may not). Relative paths, each depth
    // these folders have, since lib/http/ (the error table) is allowed.
    files: ["dataplane/src/{engines,models,tensors,inference}/**/*.ts"],
    rules: forbidden(
      "engines, models, tensors and the inference pipeline know nothing of the gRPC server, the services or the HTTP routes above them (nor the operator, the CLI, tools/): move what both need down",
      "**/operator/**",
      "**/cli/**",
      "**/tools/**",
      ...["http", "services", "server"].flatMap((room) => [`../${room}/**`, `../../${room}/**`]),
    ),
  },
  {
    // Shared memory sits below the pipeline, beside tensors: it reads and writes tensors'
    // bytes and knows nothing of engines, models, the pipeline or the servers above.
    files: ["dataplane/src/shared-memory/**/*.ts"],
    rules: forbidden(
      "shared-memory imports tensors and lib only: the pipeline, the services and the HTTP routes import it",
      "**/operator/**",
      "**/cli/**",
      "**/tools/**",
      ...["http", "services", "server", "inference", "engines", "models", "scheduling"].map((room) => `../${room}/**`),
    ),
  },
  {
    // The activator (one per model scaled to zero) stands on lib/ alone.
    files: ["activator/src/**/*.ts"],
    rules: forbidden(
      "the activator imports lib/ only: neither the data plane, the operator, the CLI nor tools/",
      "**/dataplane/**",
      "**/operator/**",
      "**/cli/**",
      "**/tools/**",
    ),
  },
  {
    files: ["cli/**/*.ts"],
    ignores: ["cli/test/**"],
    rules: forbidden(
      "the product never imports tools/ (the docs generator reads the product, not the reverse)",
      "**/tools/**",
    ),
  },
  {
    files: ["**/*.js", "**/*.mjs"],
    languageOptions: { globals: { process: "readonly", console: "readonly", URL: "readonly", Buffer: "readonly" } },
  },
);
