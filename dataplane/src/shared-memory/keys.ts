import { invalidArgument } from "../../../lib/errors.js";

/** Where Linux keeps POSIX shared-memory objects: shm_open("/name") opens /dev/shm/name. */
export const SHM_DIRECTORY = "/dev/shm";

/**
 * Key prefixes clients may not register: Triton's Python backend names its own segments with
 * the first; the python engine (engines/python/shared-memory.ts) the second. A client that
 * registered one could read or write another model's tensors.
 */
export const RESERVED_KEY_PREFIXES = ["triton_python_backend_shm_region_", "dynamo-kserve-python-"] as const;

/** The longest object name shm_open takes after its leading slashes (NAME_MAX). */
const MAX_NAME_BYTES = 255;

/**
 * The file behind a POSIX shared-memory key, or Triton's INVALID_ARGUMENT naming the region
 * and key. Triton's checks: a key of slashes only is invalid, a reserved prefix after the
 * slashes is refused. Ours on top, since the key becomes a path here (Node has no shm_open):
 * one path component (no further `/`, not `.` or `..`), no NUL, at most 255 bytes — what
 * shm_open itself accepts, so a key cannot reach outside /dev/shm.
 */
export function shmKeyPath(name: string, key: string): string {
  const object = key.replace(/^\/+/, "");
  const invalid = (): Error =>
    invalidArgument(`cannot register shared memory region '${name}' - invalid shm key '${key}'`);
  if (object === "") throw invalid();
  const reserved = RESERVED_KEY_PREFIXES.find((prefix) => object.startsWith(prefix));
  if (reserved !== undefined) {
    throw invalidArgument(
      `cannot register shared memory region '${name}' with key '${key}' as the key contains the reserved prefix '${reserved}'`,
    );
  }
  if (
    object.includes("/") ||
    object.includes("\0") ||
    object === "." ||
    object === ".." ||
    Buffer.byteLength(object, "utf8") > MAX_NAME_BYTES
  ) {
    throw invalid();
  }
  return `${SHM_DIRECTORY}/${object}`;
}
