import { Command } from "commander";
import { VERSION } from "../dataplane/src/version.js";
import { activatorCommand } from "./activator.js";
import { dataplaneCommand } from "./dataplane.js";
import { inferCommand } from "./infer.js";
import { migrateCommand } from "./migrate.js";
import { operatorCommand } from "./operator.js";

/** `dynamo-kserve` and its commands (main.ts runs it; the option reference is generated from it). */
export function dynamoKserveProgram(): Command {
  return new Command("dynamo-kserve")
    .description("KServe v2 / Triton-compatible inference (gRPC, REST, OpenAI) and its Kubernetes operator")
    .version(VERSION)
    .addCommand(dataplaneCommand())
    .addCommand(operatorCommand())
    .addCommand(activatorCommand())
    .addCommand(inferCommand())
    .addCommand(migrateCommand());
}
