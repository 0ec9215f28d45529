import assert from "node:assert/strict";
import { createServer } from "node:net";
import { freePorts } from "../support/ports.js";

describe("freePorts", () => {
  it("gives ports that are all different and free to listen on", async () => {
    const ports = await freePorts(64);
    assert.equal(new Set(ports).size, 64);
    for (const port of ports) {
      await new Promise<void>((resolve, reject) => {
        const server = createServer();
        server.once("error", reject);
        server.listen(port, "127.0.0.1", () => server.close(() => resolve()));
      });
    }
  });
});
