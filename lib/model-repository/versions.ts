import type { ModelVersionPolicy } from "../../proto/gen/ts/model_config.js";
import { ConfigError } from "./config.js";

/**
 * The versions a model serves, from the version folders found and its version_policy
 * (default: the latest one). A model without version folders (a single config file,
 * or a folder for an engine that needs no model files) serves version 1.
 */
export function servedVersions(
  policy: ModelVersionPolicy | undefined,
  found: readonly number[],
  source: string,
): string[] {
  const available = found.length > 0 ? [...found].sort((a, b) => a - b) : [1];
  const choice = policy?.policyChoice;
  let chosen: number[];
  switch (choice?.$case) {
    case "all":
      chosen = available;
      break;
    case "specific": {
      chosen = choice.value.versions.map(Number).sort((a, b) => a - b);
      const missing = chosen.filter((version) => !available.includes(version));
      if (missing.length > 0) {
        throw new ConfigError(
          source,
          `version_policy.specific: version(s) ${missing.join(", ")} not found (available: ${available.join(", ")})`,
        );
      }
      break;
    }
    case "latest":
    case undefined: {
      const count = choice?.$case === "latest" ? choice.value.numVersions : 1;
      if (count < 1) throw new ConfigError(source, "version_policy.latest.num_versions: must be at least 1");
      chosen = available.slice(-count);
      break;
    }
  }
  if (chosen.length === 0) throw new ConfigError(source, "version_policy: selects no version");
  return chosen.map(String);
}
