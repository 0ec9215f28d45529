import { ResponderBuilder, ServerInterceptingCall, type ServerInterceptor } from "@grpc/grpc-js";
import { boundedDetail } from "../limits.js";

/**
 * Bounds the detail of every status the server sends (ours, grpc-health-check's,
 * reflection's, the token check's): details echo what clients sent, and a `grpc-message`
 * trailer past a stock client's metadata limit reaches the caller as RESOURCE_EXHAUSTED
 * instead of the real code. First in the interceptor list (the innermost), so it sees the
 * statuses the other interceptors send themselves.
 */
export const boundedStatusInterceptor: ServerInterceptor = (_method, call) =>
  new ServerInterceptingCall(
    call,
    new ResponderBuilder()
      .withSendStatus((outcome, next) => next({ ...outcome, details: boundedDetail(outcome.details) }))
      .build(),
  );
