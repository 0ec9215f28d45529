#!/usr/bin/env node
import { Command } from "commander";
import { VERSION } from "../dataplane/src/version.js";
import { dataplaneCommand } from "./dataplane.js";
import { inferCommand } from "./infer.js";

const program = new Command("dynamo-kserve")
  .description("KServe v2 / Triton-compatible gRPC inference on Kubernetes")
  .version(VERSION)
  .addCommand(dataplaneCommand())
  .addCommand(inferCommand());

await program.parseAsync(process.argv);
