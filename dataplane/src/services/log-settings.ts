import type { Logger } from "pino";
import type {
  GRPCInferenceServiceServer,
  LogSettingsRequest_SettingValue,
  LogSettingsResponse_SettingValue,
} from "../../../proto/gen/ts/grpc_service.js";
import { invalidArgument } from "../../../lib/errors.js";
import type { Operations } from "./unary.js";

/**
 * Triton's LogSettings RPC over the data plane's logger: reading reports the settings in
 * Triton's keys, writing changes the log level at run time. Triton's separate switches
 * become one level: verbose 1 is debug, 2 and more trace, else the lowest switched-on
 * of info, warning, error; none at all is silent. Logs are JSON lines on stdout (what
 * Kubernetes collects), so `log_file` can only be empty and `log_format` is "json".
 */

interface Switches {
  log_info: boolean;
  log_warning: boolean;
  log_error: boolean;
  log_verbose_level: number;
}

type SettingValue = LogSettingsRequest_SettingValue;

const LEVEL_RANK: Record<string, number> = {
  trace: 10,
  debug: 20,
  info: 30,
  warn: 40,
  error: 50,
  fatal: 60,
  silent: 100,
};

export function logSettingsOperation(
  logger: Logger,
  onChange: (level: string) => void = () => undefined,
): Operations<Pick<GRPCInferenceServiceServer, "logSettings">>["logSettings"] {
  return (request) => {
    const switches = switchesOf(logger.level);
    for (const [key, value] of Object.entries(request.settings)) applySetting(switches, key, value);
    const level = levelOf(switches);
    if (level !== logger.level) {
      logger.level = level;
      onChange(level);
    }
    return { settings: settingsOf(switchesOf(logger.level)) };
  };
}

function switchesOf(level: string): Switches {
  const rank = LEVEL_RANK[level] ?? LEVEL_RANK["info"]!;
  return {
    log_info: rank <= LEVEL_RANK["info"]!,
    log_warning: rank <= LEVEL_RANK["warn"]!,
    log_error: rank <= LEVEL_RANK["error"]!,
    log_verbose_level: rank <= LEVEL_RANK["trace"]! ? 2 : rank <= LEVEL_RANK["debug"]! ? 1 : 0,
  };
}

function levelOf(switches: Switches): string {
  if (switches.log_verbose_level >= 2) return "trace";
  if (switches.log_verbose_level === 1) return "debug";
  if (switches.log_info) return "info";
  if (switches.log_warning) return "warn";
  if (switches.log_error) return "error";
  return "silent";
}

function applySetting(switches: Switches, key: string, value: SettingValue | undefined): void {
  switch (key) {
    case "log_info":
    case "log_warning":
    case "log_error":
      switches[key] = valueOf(key, value, "boolParam");
      return;
    case "log_verbose_level":
      switches.log_verbose_level = valueOf(key, value, "uint32Param");
      return;
    case "log_file":
      if (valueOf(key, value, "stringParam") !== "") {
        throw invalidArgument(
          "log setting 'log_file': this data plane logs JSON lines to stdout; only \"\" is accepted",
        );
      }
      return;
    case "log_format": {
      const format = valueOf(key, value, "stringParam");
      if (format !== "json") {
        throw invalidArgument(
          `log setting 'log_format': logs are JSON lines; only "json" is accepted, not '${format}'`,
        );
      }
      return;
    }
    default:
      throw invalidArgument(
        `unknown log setting '${key}'; known: log_info, log_warning, log_error, log_verbose_level, log_file, log_format`,
      );
  }
}

interface SettingTypes {
  boolParam: boolean;
  uint32Param: number;
  stringParam: string;
}

function valueOf<Case extends keyof SettingTypes>(
  key: string,
  value: SettingValue | undefined,
  expected: Case,
): SettingTypes[Case] {
  const choice = value?.parameterChoice;
  if (choice?.$case !== expected) {
    throw invalidArgument(
      `log setting '${key}' takes a ${expected.replace("Param", "")} value, got ${choice?.$case ?? "none"}`,
    );
  }
  return choice.value as SettingTypes[Case];
}

function settingsOf(switches: Switches): Record<string, LogSettingsResponse_SettingValue> {
  const bool = (value: boolean): LogSettingsResponse_SettingValue => ({
    parameterChoice: { $case: "boolParam", value },
  });
  const text = (value: string): LogSettingsResponse_SettingValue => ({
    parameterChoice: { $case: "stringParam", value },
  });
  return {
    log_info: bool(switches.log_info),
    log_warning: bool(switches.log_warning),
    log_error: bool(switches.log_error),
    log_verbose_level: { parameterChoice: { $case: "uint32Param", value: switches.log_verbose_level } },
    log_file: text(""),
    log_format: text("json"),
  };
}
