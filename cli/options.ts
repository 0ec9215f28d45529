/**
 * What the long-running commands share: stopping on signals. Options are declared with
 * lib/contract/options.ts.
 */

/** The signals that stop a long-running service: SIGHUP too (a closed terminal, some supervisors). */
const STOP_SIGNALS: readonly NodeJS.Signals[] = ["SIGTERM", "SIGINT", "SIGHUP"];

/**
 * Stops a long-running service on the first of SIGTERM, SIGINT or SIGHUP, then exits 0
 * (1 if stopping failed). Later signals — a repeated SIGTERM, Ctrl-C after it, a signal to
 * the whole process group that a --grpc-workers primary also passes on — are logged and
 * change nothing: the drain runs to its end (SIGKILL cuts it).
 */
export function stopOnSignals(
  service: { stop(): Promise<void> },
  logger: { info(object: object, message: string): void },
): void {
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (stopping) {
      logger.info({ signal }, "already stopping");
      return;
    }
    stopping = true;
    logger.info({ signal }, "stopping");
    service.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  for (const signal of STOP_SIGNALS) process.on(signal, onSignal);
}
