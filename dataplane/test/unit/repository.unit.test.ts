import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { scanModelSources } from "../../../lib/model-repository/sources.js";

describe("model repository scan", () => {
  let repository: string;
  beforeEach(() => (repository = mkdtempSync(join(tmpdir(), "dynamo-kserve-scan-"))));
  afterEach(() => rmSync(repository, { recursive: true, force: true }));

  const fingerprint = async (): Promise<string> => (await scanModelSources([repository], []))[0]!.fingerprint;

  it("changes a model's fingerprint when a file in a version folder changes, so poll mode reloads it", async () => {
    mkdirSync(join(repository, "m", "1"), { recursive: true });
    writeFileSync(join(repository, "m", "1", "model.onnx"), "first");
    const [source] = await scanModelSources([repository], []);
    assert.equal(source?.folder, join(repository, "m"));
    assert.equal(source?.content, undefined, "no config file: auto-complete decides");
    const first = await fingerprint();
    assert.equal(await fingerprint(), first, "nothing changed, nothing to reload");
    writeFileSync(join(repository, "m", "1", "model.onnx"), "second, longer");
    const second = await fingerprint();
    assert.notEqual(second, first);
    mkdirSync(join(repository, "m", "2"));
    assert.notEqual(await fingerprint(), second);
  });

  it("takes positive numbers as versions, as Triton: not 0, not names starting with 0", async () => {
    for (const folder of ["0", "01", "2", "10", "v3"]) mkdirSync(join(repository, "m", folder), { recursive: true });
    const [source] = await scanModelSources([repository], []);
    assert.deepEqual(source?.versions, [2, 10]);
  });
});
