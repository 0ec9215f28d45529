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
      "the operator never imports the data plane's runtime or the CLI: what they share is in lib/",
      "**/dataplane/**",
      "**/cli/**",
    ),
  },
  {
    files: ["lib/**/*.ts"],
    ignores: ["lib/test/**"],
    rules: forbidden(
      "lib/ is what the data plane, the operator and the CLI share: it loads no runtime and imports none of them",
      "**/dataplane/**",
      "**/operator/**",
      "**/cli/**",
      "onnxruntime-node",
      "@kubernetes/client-node",
    ),
  },
  {
    files: ["dataplane/src/**/*.ts"],
    rules: forbidden("the data plane imports neither the operator nor the CLI", "**/operator/**", "**/cli/**"),
  },
  {
    files: ["**/*.js", "**/*.mjs"],
    languageOptions: { globals: { process: "readonly", console: "readonly", URL: "readonly", Buffer: "readonly" } },
  },
);
