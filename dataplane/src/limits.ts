/**
 * The data plane's bounds on what one client can make it do, in one place (the README's
 * "Bounds" lists them). Each room enforces its own; none is a timed limit.
 */

/**
 * The largest gRPC message accepted or sent unless --max-message-size says otherwise. It
 * bounds what one request can make the process hold (a message is decoded, checked and
 * copied: several times its size at the peak), and grpc-js stops inflating a compressed
 * message past it. 64 MiB fits a pod; Triton's own default (2 GiB - 1) let one request
 * take gigabytes.
 */
export const DEFAULT_MAX_MESSAGE_SIZE = 64 * 1024 * 1024;

/** ModelStreamInfer requests of one stream running at once unless --stream-max-pending says otherwise. */
export const DEFAULT_STREAM_MAX_PENDING = 1024;

/**
 * The most an error detail may take, in UTF-8 bytes. Details echo what clients sent (model
 * and tensor names, shapes) and travel in the `grpc-message` trailer, percent-encoded (up
 * to 3 bytes per byte): stock clients refuse trailers past 8 KiB (gRPC C-core's default)
 * and would then report RESOURCE_EXHAUSTED instead of what went wrong.
 */
export const MAX_ERROR_DETAIL_BYTES = 2048;

/** The largest `max_tokens` a request may ask of an LLM engine (2^20). */
export const MAX_TOKENS_LIMIT = 1_048_576;
