import { status } from "@grpc/grpc-js";
import assert from "node:assert/strict";
import type { LogSettingsRequest_SettingValue } from "../../../proto/gen/ts/grpc_service.js";
import { identityRequest } from "../fixtures/requests.js";
import { call, callError, eventually, infer, type ServerProcess } from "../fixtures/server.js";
import { useServer } from "../fixtures/serving.js";

const bool = (value: boolean): LogSettingsRequest_SettingValue => ({ parameterChoice: { $case: "boolParam", value } });
const uint32 = (value: number): LogSettingsRequest_SettingValue => ({
  parameterChoice: { $case: "uint32Param", value },
});

describe("structured logs and the LogSettings RPC", function () {
  this.timeout(20_000);
  const serving = useServer({}, ["--log-level", "info"]);
  let server: ServerProcess;
  before(() => ({ server } = serving));

  const settings = async (changes: Record<string, LogSettingsRequest_SettingValue> = {}) =>
    Object.fromEntries(
      Object.entries((await call(server.client, "logSettings", { settings: changes })).settings).map(([key, value]) => [
        key,
        value.parameterChoice?.value,
      ]),
    );
  const linesFor = (id: string) => server.logs.filter((entry) => entry["requestId"] === id);

  it("reads the settings in Triton's keys", async () => {
    assert.deepEqual(await settings(), {
      log_info: true,
      log_warning: true,
      log_error: true,
      log_verbose_level: 0,
      log_file: "",
      log_format: "json",
    });
  });

  it("turns on verbose logging at run time: each request is then logged with its id", async () => {
    await infer(server.client, identityRequest({ id: "quiet-1" }));
    assert.deepEqual(linesFor("quiet-1"), [], "info level logs no per-request lines");
    assert.equal((await settings({ log_verbose_level: uint32(1) }))["log_verbose_level"], 1);
    await infer(server.client, identityRequest({ id: "loud-1" }));
    await callError(server.client, "modelInfer", {
      ...identityRequest({ id: "loud-2" }),
      inputs: [{ ...identityRequest({ id: "x" }).inputs[0]!, name: "NOPE" }],
    });
    await eventually(() => assert.equal(linesFor("loud-2").length, 1));
    const [served] = linesFor("loud-1");
    assert.equal(served?.["msg"], "request served");
    assert.equal(served?.["model"], "identity_fp32");
    assert.equal(served?.["endpoint"], "ModelInfer");
    assert.equal(served?.["level"], 20);
    const [failed] = linesFor("loud-2");
    assert.equal(failed?.["msg"], "request failed");
    assert.equal(failed?.["kind"], "InvalidArgument");
    assert.match(String(failed?.["err"]), /unexpected input 'NOPE'/);
  });

  it("maps Triton's switches to one level and back", async () => {
    const warnOnly = await settings({ log_verbose_level: uint32(0), log_info: bool(false) });
    assert.deepEqual([warnOnly["log_info"], warnOnly["log_warning"], warnOnly["log_error"]], [false, true, true]);
    await infer(server.client, identityRequest({ id: "warn-1" }));
    const restored = await settings({ log_info: bool(true) });
    assert.equal(restored["log_info"], true);
  });

  it("refuses unknown settings, wrong types and a log file, naming the setting", async () => {
    const unknown = await callError(server.client, "logSettings", { settings: { log_colour: bool(true) } });
    assert.equal(unknown.code, status.INVALID_ARGUMENT);
    assert.match(unknown.details, /unknown log setting 'log_colour'/);
    const wrongType = await callError(server.client, "logSettings", { settings: { log_info: uint32(1) } });
    assert.match(wrongType.details, /'log_info' takes a bool value, got uint32Param/);
    const file = await callError(server.client, "logSettings", {
      settings: { log_file: { parameterChoice: { $case: "stringParam", value: "/tmp/triton.log" } } },
    });
    assert.match(file.details, /'log_file'.*stdout/);
    assert.equal((await settings())["log_info"], true, "a refused change changes nothing");
  });
});
