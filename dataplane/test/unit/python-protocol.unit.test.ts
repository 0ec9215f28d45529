import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { dirname, join } from "node:path";
import { PYTHON_STUB } from "../../src/engines/python/instance.js";
import { STUB_PROTOCOL } from "../../src/engines/python/protocol.js";
import { REPO_ROOT } from "../fixtures/paths.js";

/** Prints the stub's TypedDicts (stub_protocol.py) as protocol.ts writes its messages. */
const DESCRIBE = join(REPO_ROOT, "dataplane", "test", "python", "describe_stub_protocol.py");

describe("python engine: the protocol between the data plane and the stub", () => {
  it("has the same message kinds, fields and field types on both sides (protocol.ts, stub_protocol.py)", () => {
    // Python's standard library only (3.11 or later, as the lint and the test venvs have).
    const stubSide: unknown = JSON.parse(
      execFileSync("python3", [DESCRIBE, dirname(PYTHON_STUB)], { encoding: "utf8" }),
    );
    assert.deepEqual(stubSide, STUB_PROTOCOL);
  });
});
