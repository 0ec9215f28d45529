/**
 * What the long-running commands share: stopping on signals. Options are declared with
 * lib/contract/options.ts.
 */

import { constants } from "node:os";

/** The signals that stop a long-running service: SIGHUP too (a closed terminal, some supervisors). */
const STOP_SIGNALS: readonly NodeJS.Signals[] = ["SIGTERM", "SIGINT", "SIGHUP"];

/** A service once started: what a stop signal asks to drain. */
interface Stoppable {
  stop(): Promise<void>;
}

/**
 * Stops a long-running service on the first of SIGTERM, SIGINT or SIGHUP, then exits 0
 * (1 if stopping failed). Later signals — a repeated SIGTERM, Ctrl-C after it, a signal to
 * the whole process group that a --grpc-workers primary also passes on — are logged and
 * change nothing: the drain runs to its end (SIGKILL cuts it).
 *
 * Called with the service still `starting`, so the handlers are in place before the service
 * says it is ready: a signal sent on that line is drained (without a handler, it would kill
 * the process, a --grpc-workers worker included). A signal before the start resolves ends the
 * process at once, as the signal itself would (there is nothing to drain yet); a start that
 * fails is the caller's to report.
 */
export function stopOnSignals(
  starting: Promise<Stoppable>,
  logger: { info(object: object, message: string): void },
): void {
  let service: Stoppable | undefined;
  starting.then(
    (started) => (service = started),
    () => undefined,
  );
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (stopping) {
      logger.info({ signal }, "already stopping");
      return;
    }
    stopping = true;
    if (service === undefined) {
      logger.info({ signal }, "stopping before the start finished");
      process.exit(128 + constants.signals[signal]);
    }
    logger.info({ signal }, "stopping");
    service.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  for (const signal of STOP_SIGNALS) process.on(signal, onSignal);
}
