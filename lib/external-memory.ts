import { setFlagsFromString } from "node:v8";

/**
 * Tensors live outside V8's heap (Buffers: requests, reassembled by grpc-js, and the socket
 * reads they came in). By default V8 starts a full collection (mark-compact) each time 64 MiB
 * more of such external memory has been allocated since the last one, however little of it is
 * still alive: at 1 MiB c16 one mark-compact every ~16 requests, 60 per thousand, most of the
 * CPU left after the copies. Counted in the heap's global limit instead, collections follow
 * what is alive: 13-19 per thousand, and about a third less CPU per request at 1 MiB and 16 MiB
 * (issue 39, measured), for a higher peak RSS (1 MiB c16: 220-263 → 287-460 MiB; 16 MiB c4:
 * 347-377 → 379-506 MiB). Under memory pressure it trades collections for garbage, not
 * for a crash: a churn of 1 MiB ×16 or 16 MiB ×8 Buffers living long enough to be promoted
 * peaked at 1.0-3.4× the ArrayBuffers without it (40-160 → 47-260 MiB, heap limits 192-704
 * MiB), and 1.5 GB of live Buffers under a 32 MiB heap ran with it as without (V8 does not
 * fail on external memory; the kernel's OOM killer would). A container sized close to the
 * data plane's peak without the flag needs that much more room. Node refuses this V8 flag in
 * NODE_OPTIONS, so it is set here, before the first request, in every process that serves —
 * the data plane's, and the bench's ceilings (bench/ceilings/), so a ratio to them compares
 * like with like.
 */
export function countExternalMemoryInHeapLimit(): void {
  setFlagsFromString("--external-memory-accounted-in-global-limit");
}
