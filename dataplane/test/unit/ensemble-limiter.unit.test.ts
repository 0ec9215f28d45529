import assert from "node:assert/strict";
import { Limiter } from "../../src/engines/ensemble/limiter.js";

/** Lets every settled promise's callbacks run. */
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe("an ensemble step's in-flight limiter (max_inflight_requests)", () => {
  it("lets `limit` holders in and the others in arrival order as places free", async () => {
    const limiter = new Limiter(2);
    const signal = new AbortController().signal;
    const admitted: string[] = [];
    for (const name of ["a", "b", "c", "d"]) void limiter.acquire(signal).then(() => admitted.push(name));
    await settle();
    assert.deepEqual(admitted, ["a", "b"]);
    limiter.release();
    await settle();
    assert.deepEqual(admitted, ["a", "b", "c"]);
    limiter.release();
    limiter.release();
    await settle();
    assert.deepEqual(admitted, ["a", "b", "c", "d"]);
  });

  it("takes a waiter whose request is cancelled out of the line, failing it", async () => {
    const limiter = new Limiter(1);
    const kept = new AbortController();
    await limiter.acquire(kept.signal);
    const cancelled = new AbortController();
    const leaving = limiter.acquire(cancelled.signal);
    let later = false;
    void limiter.acquire(kept.signal).then(() => (later = true));
    cancelled.abort();
    await assert.rejects(leaving, /cancelled/);
    limiter.release();
    await settle();
    assert.equal(later, true, "the place went to the next waiter still in line");
  });
});
