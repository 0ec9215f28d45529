#!/usr/bin/env node
import { dynamoKserveProgram } from "./program.js";

try {
  await dynamoKserveProgram().parseAsync(process.argv);
} catch (error) {
  // A start-up failure (unreadable repository, port in use) is one clear line, not a stack.
  process.stderr.write(`dynamo-kserve: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
}
