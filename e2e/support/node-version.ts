import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

/**
 * The Node.js version CI tests on (.node-version, the one place it is pinned; scripts/node.sh
 * brings it where the machine's is older). Its major is the image's (the Dockerfile's
 * BASE_IMAGE) and package.json's engines floor.
 */
export const PINNED_NODE = readFileSync(
  fileURLToPath(new URL("../../../.node-version", import.meta.url)),
  "utf8",
).trim();

/** The major of a Node.js version ("24.21.0", "v24.21.0" -> 24). */
export const majorOf = (version: string): number => Number(/^v?(\d+)\./.exec(version)?.[1]);
