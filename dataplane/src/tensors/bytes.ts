import { invalidArgument } from "../../../lib/errors.js";

/**
 * BYTES tensors in raw form: every element is a 4-byte little-endian length followed by
 * that many bytes, elements back to back (KServe v2 / Triton binary tensor format).
 */

const LENGTH_PREFIX = 4;
/** What a client sending raw BYTES must know: unframed text reads as a huge length. */
const FRAMING_HINT = "each BYTES element needs a 4-byte little-endian length prefix before its bytes";

/** Checks the framing of a raw BYTES tensor and returns its element count. */
export function countBytesElements(data: Uint8Array, tensorName: string): number {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  let offset = 0;
  let count = 0;
  while (offset < data.byteLength) {
    if (offset + LENGTH_PREFIX > data.byteLength) {
      throw invalidArgument(
        `tensor '${tensorName}': malformed BYTES data: element ${count} has a truncated 4-byte length prefix at byte ${offset} (${FRAMING_HINT})`,
      );
    }
    const length = view.getUint32(offset, true);
    offset += LENGTH_PREFIX;
    if (offset + length > data.byteLength) {
      throw invalidArgument(
        `tensor '${tensorName}': malformed BYTES data: element ${count} declares ${length} bytes but only ${data.byteLength - offset} remain (${FRAMING_HINT})`,
      );
    }
    offset += length;
    count++;
  }
  return count;
}

/** The elements of a well-formed raw BYTES tensor, as views into `data`. */
export function splitBytesElements(data: Uint8Array): Uint8Array[] {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const elements: Uint8Array[] = [];
  let offset = 0;
  while (offset + LENGTH_PREFIX <= data.byteLength) {
    const length = view.getUint32(offset, true);
    offset += LENGTH_PREFIX;
    elements.push(data.subarray(offset, offset + length));
    offset += length;
  }
  return elements;
}

/** Frames elements into one raw BYTES buffer. */
export function joinBytesElements(elements: readonly Uint8Array[]): Uint8Array {
  let total = 0;
  for (const element of elements) total += LENGTH_PREFIX + element.byteLength;
  const out = new Uint8Array(total);
  const view = new DataView(out.buffer);
  let offset = 0;
  for (const element of elements) {
    view.setUint32(offset, element.byteLength, true);
    out.set(element, offset + LENGTH_PREFIX);
    offset += LENGTH_PREFIX + element.byteLength;
  }
  return out;
}
