#!/usr/bin/env node
import { Command } from "commander";
import { VERSION } from "../dataplane/src/version.js";
import { dataplaneCommand } from "./dataplane.js";
import { inferCommand } from "./infer.js";
import { migrateCommand } from "./migrate.js";
import { operatorCommand } from "./operator.js";

const program = new Command("dynamo-kserve")
  .description("KServe v2 / Triton-compatible gRPC inference on Kubernetes")
  .version(VERSION)
  .addCommand(dataplaneCommand())
  .addCommand(operatorCommand())
  .addCommand(inferCommand())
  .addCommand(migrateCommand());

try {
  await program.parseAsync(process.argv);
} catch (error) {
  // A start-up failure (unreadable repository, port in use) is one clear line, not a stack.
  process.stderr.write(`dynamo-kserve: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
}
