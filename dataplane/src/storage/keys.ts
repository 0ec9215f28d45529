import { createHash } from "node:crypto";

/**
 * What object keys may become under the model cache. A key is written below its model's
 * snapshot folder by its path relative to the repository's prefix, so a key that could
 * name something else there — `..`, an absolute path, a backslash (a separator on some
 * systems), an empty or `.` segment, a control character (a NUL cuts a path where the file
 * system reads it) — is refused, for that model only.
 */
export function unsafeKeyProblem(relativeKey: string): string | undefined {
  if (relativeKey === "") return "is empty";
  if (relativeKey.startsWith("/")) return "is an absolute path";
  if (relativeKey.includes("\\")) return "contains a backslash";
  if ([...relativeKey].some((character) => character < " " || character === "\u007f"))
    return "contains a control character";
  const segments = relativeKey.split("/");
  if (segments.includes("..")) return "has a '..' segment";
  if (segments.some((segment) => segment === "" || segment === ".")) return "has an empty or '.' segment";
  return undefined;
}

/** Keys of which one is also a folder of another (`m/1` and `m/1/model.onnx`): no file system holds both. */
export function fileAndFolderClash(relativeKeys: readonly string[]): string | undefined {
  const files = new Set(relativeKeys);
  for (const key of relativeKeys) {
    for (let slash = key.indexOf("/"); slash >= 0; slash = key.indexOf("/", slash + 1)) {
      const folder = key.slice(0, slash);
      if (files.has(folder)) return folder;
    }
  }
  return undefined;
}

/**
 * A digest of a set of objects that does not depend on the order they are listed in (stores
 * list by key, but a repository's listing and a model's own may interleave other keys):
 * the sum of each object's hash, with the count. Equal listings give equal digests, so an
 * unchanged bucket downloads nothing.
 */
export class ListingDigest {
  private sum = 0n;
  private count = 0;
  private bytes = 0;

  add(relativeKey: string, version: string, size: number): void {
    const hash = createHash("sha256").update(`${relativeKey}\0${version}\0${size}`).digest("hex");
    this.sum = (this.sum + BigInt(`0x${hash}`)) % 2n ** 256n;
    this.count++;
    this.bytes += size;
  }

  get objects(): number {
    return this.count;
  }

  get totalBytes(): number {
    return this.bytes;
  }

  /** 20 hex digits: a snapshot folder's name carries it. */
  digest(): string {
    return createHash("sha256")
      .update(`${this.sum.toString(16)}:${this.count}`)
      .digest("hex")
      .slice(0, 20);
  }
}
