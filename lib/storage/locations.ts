import { isAbsolute, relative, resolve } from "node:path";

/**
 * Where a model repository (or a model's files) lives: a local folder, or a prefix in
 * object storage written as Triton writes it:
 *
 * - `s3://bucket/prefix` (AWS, region and endpoint from the SDK's configuration),
 * - `s3://host:port/bucket/prefix` (an S3-compatible endpoint over http, path-style), or
 *   `s3://https://host:port/bucket/prefix` (the same over https),
 * - `gs://bucket/prefix`,
 * - `as://account/container/prefix` (Azure Blob Storage).
 *
 * Parsed once here, for the data plane, the operator and migrate. A prefix is held without
 * leading or trailing slashes; "" is the whole bucket.
 */
export type StorageLocation =
  | { readonly scheme: "file"; readonly path: string }
  | {
      readonly scheme: "s3";
      readonly bucket: string;
      readonly prefix: string;
      /** `http(s)://host:port` for an S3-compatible store named in the URI; absent for AWS. */
      readonly endpoint?: string;
    }
  | { readonly scheme: "gs"; readonly bucket: string; readonly prefix: string }
  | { readonly scheme: "as"; readonly account: string; readonly container: string; readonly prefix: string };

export type RemoteLocation = Exclude<StorageLocation, { scheme: "file" }>;
export type RemoteScheme = RemoteLocation["scheme"];

export const REMOTE_SCHEMES: readonly RemoteScheme[] = ["s3", "gs", "as"];

/** Why a location cannot be used, naming what is wrong with it. */
export class StorageLocationError extends Error {
  override readonly name = "StorageLocationError";
}

/** True for `s3://`, `gs://` and `as://` locations (anything else is a local path). */
export function isRemoteLocation(text: string): boolean {
  return /^(s3|gs|as):\/\//.test(text);
}

/** A location from its text; a text without a remote scheme is a local path (resolved). */
export function parseStorageLocation(text: string): StorageLocation {
  const match = /^([a-z0-9]+):\/\/(.*)$/s.exec(text);
  if (match === null) {
    if (text === "") throw new StorageLocationError("a model repository location is empty");
    return { scheme: "file", path: resolve(text) };
  }
  const [, scheme, rest] = match as unknown as [string, string, string];
  switch (scheme) {
    case "s3":
      return parseS3(text, rest);
    case "gs": {
      const [bucket, prefix] = firstSegment(text, rest, "bucket");
      return { scheme: "gs", bucket: checkedBucket(text, bucket), prefix: checkedPrefix(text, prefix) };
    }
    case "as": {
      const [account, afterAccount] = firstSegment(text, rest, "storage account");
      const [container, prefix] = firstSegment(text, afterAccount, "container");
      if (!/^[a-z0-9]{3,24}$/.test(account))
        throw new StorageLocationError(
          `'${text}': the storage account '${account}' is not 3-24 lower-case letters and digits`,
        );
      return { scheme: "as", account, container: checkedBucket(text, container), prefix: checkedPrefix(text, prefix) };
    }
    case "file":
      return { scheme: "file", path: resolve(rest) };
    default:
      throw new StorageLocationError(
        `'${text}': the scheme '${scheme}://' is not supported; use a local folder, s3://, gs:// or as://`,
      );
  }
}

function parseS3(text: string, rest: string): StorageLocation {
  // s3://https://host:port/bucket/prefix: the endpoint's own scheme comes first.
  const explicit = /^(https?):\/\/(.*)$/s.exec(rest);
  const protocol = explicit?.[1] ?? "http";
  const afterProtocol = explicit?.[2] ?? rest;
  const [first, afterFirst] = firstSegment(text, afterProtocol, "bucket");
  // A bucket name has no ':': a first segment with a port is an S3-compatible endpoint.
  if (explicit !== null || /:\d+$/.test(first)) {
    if (!/^[A-Za-z0-9.-]+:\d{1,5}$|^\[[0-9a-fA-F:]+\]:\d{1,5}$/.test(first))
      throw new StorageLocationError(`'${text}': '${first}' is not a host:port endpoint`);
    const [bucket, prefix] = firstSegment(text, afterFirst, "bucket");
    return {
      scheme: "s3",
      endpoint: `${protocol}://${first}`,
      bucket: checkedBucket(text, bucket),
      prefix: checkedPrefix(text, prefix),
    };
  }
  return { scheme: "s3", bucket: checkedBucket(text, first), prefix: checkedPrefix(text, afterFirst) };
}

/** The first path segment and the rest (without the slash between). */
function firstSegment(text: string, path: string, what: string): [string, string] {
  const slash = path.indexOf("/");
  const segment = slash < 0 ? path : path.slice(0, slash);
  if (segment === "") throw new StorageLocationError(`'${text}' names no ${what}`);
  return [segment, slash < 0 ? "" : path.slice(slash + 1)];
}

function checkedBucket(text: string, bucket: string): string {
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$/.test(bucket))
    throw new StorageLocationError(`'${text}': '${bucket}' is not a bucket or container name`);
  return bucket;
}

/**
 * A prefix with its slashes trimmed. Segments "." and ".." are refused: object keys may hold
 * them, but a repository named by one would mean different things to different stores.
 */
function checkedPrefix(text: string, prefix: string): string {
  const trimmed = prefix.replace(/^\/+|\/+$/g, "");
  const segments = trimmed === "" ? [] : trimmed.split("/");
  if (segments.some((segment) => segment === "" || segment === "." || segment === ".."))
    throw new StorageLocationError(`'${text}': the path has an empty, '.' or '..' segment`);
  if ([...trimmed].some((character) => character < " " || character === "\u007f"))
    throw new StorageLocationError(`'${text}': the path has a control character`);
  return trimmed;
}

/** The location as its URI (or path): what logs, errors and status name. Never holds credentials. */
export function formatStorageLocation(location: StorageLocation): string {
  switch (location.scheme) {
    case "file":
      return location.path;
    case "s3": {
      const endpoint = location.endpoint === undefined ? "" : `${location.endpoint.replace(/^http:\/\//, "")}/`;
      return `s3://${endpoint}${location.bucket}${suffix(location.prefix)}`;
    }
    case "gs":
      return `gs://${location.bucket}${suffix(location.prefix)}`;
    case "as":
      return `as://${location.account}/${location.container}${suffix(location.prefix)}`;
  }
}

const suffix = (prefix: string): string => (prefix === "" ? "" : `/${prefix}`);

/** `location` with `child` (one or more `/`-separated segments) appended. */
export function childLocation(location: StorageLocation, child: string): StorageLocation {
  if (location.scheme === "file") return { scheme: "file", path: resolve(location.path, child) };
  const prefix = [location.prefix, child].filter((part) => part !== "").join("/");
  return { ...location, prefix: checkedPrefix(`${formatStorageLocation(location)}/${child}`, prefix) };
}

/**
 * True when `inner` is `outer` or lies under it: the same store (scheme, endpoint, bucket or
 * account and container) and a prefix (or path) below. What decides where a client may point
 * a load (RepositoryModelLoad's model_path): only under locations the server was given.
 */
export function locationContains(outer: StorageLocation, inner: StorageLocation): boolean {
  if (outer.scheme === "file" || inner.scheme === "file") {
    if (outer.scheme !== "file" || inner.scheme !== "file") return false;
    const path = relative(outer.path, inner.path);
    return path === "" || (!path.startsWith("..") && !isAbsolute(path));
  }
  if (storeOf(outer) !== storeOf(inner)) return false;
  return outer.prefix === "" || inner.prefix === outer.prefix || inner.prefix.startsWith(`${outer.prefix}/`);
}

/** What names one store: scheme, endpoint, bucket (or account and container). */
function storeOf(location: RemoteLocation): string {
  switch (location.scheme) {
    case "s3":
      return `s3 ${location.endpoint ?? ""} ${location.bucket}`;
    case "gs":
      return `gs ${location.bucket}`;
    case "as":
      return `as ${location.account} ${location.container}`;
  }
}
