import assert from "node:assert/strict";
import { mkdirSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
import { TestRepository } from "../fixtures/repository.js";
import { identityRequest } from "../fixtures/requests.js";
import { call, eventually, infer, startServer, type ServerProcess } from "../fixtures/server.js";
import { useServer } from "../fixtures/serving.js";

/**
 * An unreadable model source (a config that is a directory, a dangling symlink, a symlink
 * loop) is that one model's problem: it is UNAVAILABLE, or keeps its last good config,
 * with a reason naming the file, and every other model keeps serving and updating.
 */

const identityConfig = (name: string): string => `
name: "${name}"
backend: "identity"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
`;

const indexEntry = async (server: ServerProcess, name: string) =>
  (await call(server.client, "repositoryIndex", { repositoryName: "", ready: false })).models.find(
    (model) => model.name === name,
  );

describe("unreadable model sources (real server over loopback)", function () {
  this.timeout(30_000);

  describe("at start", () => {
    const serving = useServer({}, [], (repository) => {
      mkdirSync(repository.path("config_is_dir", "config.pbtxt"), { recursive: true });
      symlinkSync(repository.path("nowhere"), repository.path("dangling_folder"));
      symlinkSync(repository.path("loop"), repository.path("loop"));
      symlinkSync(repository.path("missing.pbtxt"), repository.path("dangling_key.pbtxt"));
      mkdirSync(repository.path("dangling_config"));
      symlinkSync(repository.path("gone", "config.pbtxt"), repository.path("dangling_config", "config.pbtxt"));
    });
    let server: ServerProcess;
    before(() => ({ server } = serving));

    it("starts, serves every other model, and reports each broken one UNAVAILABLE with a reason naming its file", async () => {
      await infer(server.client, identityRequest());
      const expected: Record<string, RegExp> = {
        config_is_dir: /config_is_dir\/config\.pbtxt.*(EISDIR|directory)/,
        dangling_folder: /dangling_folder.*(ENOENT|no such file)/,
        loop: /loop.*(ELOOP|symbolic links)/,
        dangling_key: /dangling_key\.pbtxt.*(ENOENT|no such file)/,
        dangling_config: /dangling_config\/config\.pbtxt.*(ENOENT|no such file)/,
      };
      for (const [name, reason] of Object.entries(expected)) {
        const entry = await indexEntry(server, name);
        assert.equal(entry?.state, "UNAVAILABLE", name);
        assert.match(entry.reason, reason);
      }
    });
  });

  describe("in poll mode", () => {
    let repository: TestRepository;
    let server: ServerProcess;
    before(async () => {
      repository = new TestRepository({ swapped: identityConfig("swapped") });
      server = await startServer(["--model-repository", repository.dir, "--repository-poll-secs", "0.2"]);
    });
    after(async () => {
      await server?.stop();
      repository?.remove();
    });

    it("a config swapped for a dangling symlink keeps its last good config with a reason, and later edits elsewhere still apply", async () => {
      const config = repository.path("swapped", "config.pbtxt");
      unlinkSync(config);
      symlinkSync(repository.path("swapped", "..2026_11_23_old", "config.pbtxt"), config);
      await eventually(async () => {
        const entry = await indexEntry(server, "swapped");
        assert.equal(entry?.state, "READY");
        assert.match(entry.reason, /swapped\/config\.pbtxt.*(ENOENT|no such file)/);
      });
      await infer(server.client, identityRequest({ model: "swapped" }));
      repository.writeModel("added_later", identityConfig("added_later"));
      await eventually(async () => assert.equal((await indexEntry(server, "added_later"))?.state, "READY"));
      await infer(server.client, identityRequest({ model: "added_later" }));
    });

    it("a symlink loop and a directory in a config's place, then a good config again: back to READY with no reason", async () => {
      const config = repository.path("swapped", "config.pbtxt");
      unlinkSync(config);
      symlinkSync(config, config);
      await eventually(async () => assert.match((await indexEntry(server, "swapped"))!.reason, /ELOOP|symbolic links/));
      unlinkSync(config);
      mkdirSync(config);
      await eventually(async () => assert.match((await indexEntry(server, "swapped"))!.reason, /EISDIR|directory/));
      rmSync(config, { recursive: true });
      writeFileSync(config, identityConfig("swapped"));
      await eventually(async () => {
        const entry = await indexEntry(server, "swapped");
        assert.equal(entry?.state, "READY");
        assert.equal(entry.reason, "");
      });
    });

    it("a new model whose folder is a dangling symlink is UNAVAILABLE and does not stop the polls", async () => {
      symlinkSync(repository.path("nowhere"), repository.path("new_dangling"));
      await eventually(async () => {
        const entry = await indexEntry(server, "new_dangling");
        assert.equal(entry?.state, "UNAVAILABLE");
        assert.match(entry.reason, /new_dangling.*(ENOENT|no such file)/);
      });
      repository.writeModel("added_after_dangling", identityConfig("added_after_dangling"));
      await eventually(async () => assert.equal((await indexEntry(server, "added_after_dangling"))?.state, "READY"));
    });
  });
});
