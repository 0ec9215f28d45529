import { Server, ServerCredentials, status, type ServerWritableStream } from "@grpc/grpc-js";
import {
  ExternalScalerService,
  type ExternalScalerServer,
  type IsActiveResponse,
  type ScaledObjectRef,
} from "../../proto/gen/ts/keda/externalscaler.js";
import type { Holding } from "./holding.js";

/** The one metric this scaler gives KEDA: requests held for want of a ready pod. */
export const HELD_REQUESTS_METRIC = "held-requests";
/** The ScaledObject trigger's metadata key for the per-pod target of held requests. */
export const TARGET_METADATA_KEY = "targetHeldRequests";

/**
 * KEDA's external-push scaler for one model: active while a request is held (StreamIsActive
 * pushes the change the moment it happens, so KEDA scales 0 -> 1 without waiting for a poll),
 * and the held count as a metric. StreamMetricSpec is not offered: KEDA then reads GetMetricSpec.
 */
export function externalScaler(holding: Holding): ExternalScalerServer {
  return {
    isActive: (_call, done) => done(null, { result: holding.held > 0 }),
    streamIsActive: (call) => pushActivity(call, holding),
    getMetricSpec: (call, done) => {
      const target = targetOf(call.request);
      if (typeof target === "string") return done({ code: status.INVALID_ARGUMENT, details: target });
      done(null, {
        metricSpecs: [
          { metricName: HELD_REQUESTS_METRIC, targetSize: BigInt(Math.ceil(target)), targetSizeFloat: target },
        ],
      });
    },
    getMetrics: (_call, done) =>
      done(null, {
        metricValues: [
          { metricName: HELD_REQUESTS_METRIC, metricValue: BigInt(holding.held), metricValueFloat: holding.held },
        ],
      }),
    // grpc-js ends a server stream that emits an error with that error's status.
    streamMetricSpec: (call) =>
      call.emit("error", {
        code: status.UNIMPLEMENTED,
        details:
          "StreamMetricSpec is not offered: the activator's metric target does not change while it runs; read GetMetricSpec",
      }),
  };
}

/**
 * Sends the activity now, then on every change of the held count, until KEDA closes the stream.
 * A client that does not read is not queued every change: while its stream is backed up only
 * the latest state is kept, sent once it drains (KEDA needs the state, not its history).
 */
function pushActivity(call: ServerWritableStream<ScaledObjectRef, IsActiveResponse>, holding: Holding): void {
  let sent = holding.held > 0;
  let backedUp = !call.write({ result: sent });
  const push = (): void => {
    const active = holding.held > 0;
    if (backedUp || active === sent) return;
    sent = active;
    backedUp = !call.write({ result: active });
  };
  call.on("drain", () => {
    backedUp = false;
    push();
  });
  const stop = holding.onHeld(push);
  call.once("cancelled", stop);
  call.once("close", stop);
  call.once("error", stop);
}

/** The target from the trigger's metadata (default 1), or why it is refused. */
export function targetOf(ref: ScaledObjectRef): number | string {
  const text = ref.scalerMetadata[TARGET_METADATA_KEY];
  if (text === undefined || text.trim() === "") return 1;
  const target = Number(text);
  if (!Number.isFinite(target) || target <= 0) {
    return `scalerMetadata.${TARGET_METADATA_KEY} must be a number above 0, got '${text}'`;
  }
  return target;
}

/** The scaler service on its own port (plaintext: KEDA reaches it inside the cluster). */
export async function serveScaler(
  holding: Holding,
  host: string,
  port: number,
): Promise<{ server: Server; port: number }> {
  const server = new Server();
  server.addService(ExternalScalerService, externalScaler(holding));
  const bound = await new Promise<number>((resolve, reject) =>
    server.bindAsync(
      `${host.includes(":") ? `[${host}]` : host}:${port}`,
      ServerCredentials.createInsecure(),
      (error, got) => (error === null ? resolve(got) : reject(error)),
    ),
  );
  return { server, port: bound };
}
