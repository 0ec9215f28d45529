import { DataPlaneError, abortedError, invalidArgument, unavailable } from "../../../lib/errors.js";
import type { Scheduling } from "../../../lib/model-repository/scheduling.js";
import type { SequenceBatching } from "../../../lib/model-repository/sequence-batching.js";
import type { Engine } from "../engines/engine.js";
import { MAX_SEQUENCE_BACKLOG } from "../limits.js";
import { nowNs } from "../models/statistics.js";
import { sequenceIdText, sequenceKey, type SequenceId } from "../tensors/parameters.js";
import { joins, nextBatch, type BatchRules } from "./batch.js";
import {
  Entry,
  QueueingScheduler,
  unloadedWhileQueued,
  unwatch,
  type ExecutionReport,
  type ExecutionStatistics,
  type RequestScheduler,
  type ScheduledRequest,
} from "./execution.js";
import { checkCorrelationIdType, nullRequest, withControls } from "./sequence-controls.js";

export interface SequenceSchedulerOptions {
  readonly model: string;
  readonly version: string;
  /** Its `sequenceBatching` set. */
  readonly scheduling: Scheduling;
  readonly engine: Engine;
  readonly statistics?: ExecutionStatistics;
  /** Where a START for a sequence still open is told (once per scheduler, as it is not the client's error). */
  readonly warn?: (message: string) => void;
}

/** A backlogged sequence whose slot has not come free is looked at again this much later (Triton's backlog_idle_wait). */
const BACKLOG_IDLE_RECHECK_MS = 50;

/** A sequence the scheduler knows: in a slot, or waiting in the backlog for one. */
interface Sequence {
  readonly key: string;
  readonly id: SequenceId;
  /** When its last request came (performance.now ms): idle past max_sequence_idle_microseconds, it is forgotten. */
  lastMs: number;
  slot: Slot | undefined;
  backlog: Backlogged | undefined;
}

/** One sequence slot of one instance (Triton's BatcherSequenceSlot). */
interface Slot {
  readonly instance: number;
  readonly index: number;
  /** The sequence it holds (its END may have come: the slot is free once that request leaves). */
  sequence: Sequence | undefined;
  /** Its sequence's requests not yet given to an execution, in arrival order. */
  readonly queue: Entry[];
  /** Oldest: a request of this slot is offered to its instance's batch or running (one at a time). */
  busy: boolean;
  /** Its sequence is over (idle, or one of its requests cancelled): the slot is free once its queue is empty. */
  forceEnd: boolean;
}

/** A sequence waiting for a free slot, with its requests. */
interface Backlogged {
  readonly sequence: Sequence;
  readonly entries: Entry[];
  /** The earliest `timeout` its requests asked for (performance.now ms); Infinity: none. */
  expiresMs: number;
  /** Left the backlog (cancelled, expired): skipped when a slot comes free, compacted away in bulk. */
  dropped: boolean;
}

/** Where a queued request is. */
interface Placement {
  readonly sequence: Sequence;
  slot?: Slot;
  backlog?: Backlogged;
  /** Oldest: taken from its slot's queue and offered to its instance's batch. */
  offered?: boolean;
}

interface Instance {
  readonly slots: Slot[];
  executing: boolean;
  /** Oldest: the slots' heads offered to the next batch, in the order they were offered. */
  readonly offered: Entry[];
  /** When the next batch waits for more requests or slots (max_queue_delay_microseconds). */
  timer: NodeJS.Timeout | undefined;
  /** Oldest with preserve_ordering: the last request offered is done. */
  lastDone: Promise<void> | undefined;
}

const nowMs = (): number => performance.now();

/**
 * Triton's sequence batcher (sequence_batch_scheduler.cc) for one model version: each
 * correlation ID's requests run in arrival order, one at a time, on the sequence slot its
 * START took (the lowest free slot index, instances in order on ties); a START with no free
 * slot waits in a FIFO backlog. A slot is freed when its sequence's END request leaves it for
 * an execution, when the sequence is idle past max_sequence_idle_microseconds, or when one of
 * its queued requests is cancelled (which ends the sequence). `direct` runs, per instance,
 * one batch of every slot's next request, null requests where a slot has none; `oldest`
 * batches the heads of the instance's sequences as the dynamic batcher would. The model is
 * told of each request's place by the control tensors (sequence-controls.ts).
 * Queued requests, executions and statistics are the shared machinery's (execution.ts).
 */
export class SequenceScheduler extends QueueingScheduler implements RequestScheduler {
  private readonly batching: SequenceBatching;
  private readonly instances: Instance[];
  /** Free slots, ordered to take the lowest slot index first, then the lowest instance: taken from the end. */
  private readonly free: Slot[] = [];
  /** Open sequences by key (sequenceKey); a sequence whose END came is no longer here. */
  private readonly sequences = new Map<string, Sequence>();
  /** Oldest first; may hold dropped sequences (taken out lazily: thousands cancelled at once cost one pass). */
  private backlog: Backlogged[] = [];
  private droppedInBacklog = 0;
  private backlogRequests = 0;
  private queuedCount = 0;
  private readonly placements = new WeakMap<Entry, Placement>();
  private readonly slotOfRunning = new WeakMap<Entry, Slot>();
  /** A null request's execution, to report its time in the engine to. */
  private readonly reports = new WeakMap<Entry, () => ExecutionReport | undefined>();
  /** The one timer of the idle reaper and the backlog timeouts, at the earliest of them. */
  private reaper: NodeJS.Timeout | undefined;
  private reaperAtMs = Infinity;
  private closed = false;
  private warned = false;
  private readonly describe: string;
  private readonly batched: boolean;
  private readonly rules: BatchRules;
  private readonly padding = new AbortController().signal;

  constructor(private readonly options: SequenceSchedulerOptions) {
    super(options.engine, options.statistics);
    const { scheduling, model, version } = options;
    const batching = scheduling.sequenceBatching;
    if (batching === undefined) throw new Error(`model '${model}' has no sequence_batching`);
    this.batching = batching;
    this.describe = `model '${model}' version ${version}`;
    this.batched = scheduling.maxBatchSize > 0;
    const strategy = batching.strategy;
    const maxBatchSize = Math.max(1, scheduling.maxBatchSize);
    this.rules = {
      batching: true,
      maxBatchSize,
      preferredBatchSizes:
        strategy.kind === "oldest" && strategy.preferredBatchSizes.length > 0
          ? strategy.preferredBatchSizes
          : [maxBatchSize],
      maxQueueDelayNs: BigInt(strategy.maxQueueDelayUs) * 1000n,
      equalShapeInputs: scheduling.equalShapeInputs,
    };
    this.instances = Array.from({ length: scheduling.instanceCount }, (_, instance) => ({
      slots: Array.from({ length: batching.slotsPerInstance }, (_, index) => ({
        instance,
        index,
        sequence: undefined,
        queue: [],
        busy: false,
        forceEnd: false,
      })),
      executing: false,
      offered: [],
      timer: undefined,
      lastDone: undefined,
    }));
    for (let index = batching.slotsPerInstance - 1; index >= 0; index--) {
      for (let instance = scheduling.instanceCount - 1; instance >= 0; instance--) {
        this.free.push(this.instances[instance]!.slots[index]!);
      }
    }
  }

  /** Requests waiting: in the backlog and in the slots' queues. */
  get queued(): number {
    return this.queuedCount;
  }

  /** Refuses every queued request (the model's engine is closing) and forgets every sequence; START is refused after. */
  close(): void {
    this.closed = true;
    clearTimeout(this.reaper);
    this.reaper = undefined;
    const reason = unloadedWhileQueued(this.describe);
    for (const instance of this.instances) {
      clearTimeout(instance.timer);
      for (const entry of instance.offered.splice(0)) this.refuse(entry, reason);
      for (const slot of instance.slots) for (const entry of slot.queue.splice(0)) this.refuse(entry, reason);
    }
    for (const waiting of this.backlog.splice(0)) for (const entry of waiting.entries) this.refuse(entry, reason);
    this.backlogRequests = 0;
    this.droppedInBacklog = 0;
    this.sequences.clear();
  }

  /**
   * Queues the request on its sequence's slot (or in the backlog). Refused, before anything
   * is queued, in Triton's words: a request without a correlation ID, of batch size > 1, whose
   * ID type the CORRID control does not take, or that continues a sequence this scheduler does
   * not know; UNAVAILABLE past the backlog's bound.
   */
  protected enqueue(scheduled: ScheduledRequest): Entry {
    const { model } = this.options;
    const sequence = scheduled.sequence;
    if (sequence !== undefined) checkCorrelationIdType(this.batching, model, scheduled.request.id, sequence.id);
    if (scheduled.batchSize > 1) {
      throw invalidArgument(
        `inference request to model '${model}' must specify batch-size 1 due to requirements of sequence batcher`,
      );
    }
    if (sequence === undefined) {
      throw invalidArgument(
        `inference request to model '${model}' must specify a non-zero or non-empty correlation ID`,
      );
    }
    if (this.closed) {
      throw unavailable(
        sequence.start
          ? "Server is stopping, scheduler for model has stopped accepting new inference requests"
          : `${this.describe} is unloading: its scheduler takes no more requests`,
      );
    }
    const { signal } = scheduled.options;
    if (signal.aborted) throw abortedError(signal);
    const key = sequenceKey(sequence.id);
    let open = this.sequences.get(key);
    if (open === undefined && !sequence.start) {
      throw invalidArgument(
        `inference request for sequence ${sequenceIdText(sequence.id)} to model '${model}' must specify the START flag on the first request of the sequence`,
      );
    }
    if (open !== undefined && sequence.start) this.conflict(sequence.id);
    const goesToBacklog = open === undefined ? this.free.length === 0 : open.backlog !== undefined;
    if (goesToBacklog && this.backlogRequests >= MAX_SEQUENCE_BACKLOG) {
      throw unavailable(
        `${this.describe}: every sequence slot is taken and the backlog holds ${this.backlogRequests} requests; retry later`,
      );
    }
    const now = nowMs();
    if (open === undefined) {
      open = { key, id: sequence.id, lastMs: now, slot: undefined, backlog: undefined };
      this.sequences.set(key, open);
      if (!goesToBacklog) this.occupy(this.free.pop()!, open);
    }
    open.lastMs = now;
    const request = withControls(scheduled.request, this.batching, this.batched, sequence);
    const entry = new Entry({ ...scheduled, request }, 0);
    const placement: Placement = { sequence: open };
    this.placements.set(entry, placement);
    this.queuedCount++;
    entry.onAbort = () => this.leaveQueue(entry, abortedError(signal));
    signal.addEventListener("abort", entry.onAbort, { once: true });
    // Its END makes the ID free for another sequence at once; this one keeps its place until its requests are done.
    if (sequence.end) this.forget(open);
    if (open.slot !== undefined) {
      placement.slot = open.slot;
      open.slot.queue.push(entry);
      this.slotChanged(open.slot);
    } else {
      this.toBacklog(open, entry, placement, scheduled.place.timeoutUs, now);
    }
    this.armReaper(now + this.idleMs);
    return entry;
  }

  private get idleMs(): number {
    return this.batching.maxSequenceIdleUs / 1000;
  }

  /** Triton warns and continues the open sequence in its slot: the previous sequence was not ended. */
  private conflict(id: SequenceId): void {
    if (this.warned) return;
    this.warned = true;
    this.options.warn?.(
      `sequence ${sequenceIdText(id)} for ${this.describe} has a conflict. The previous sequence did not end before this sequence start. Previous sequence will be terminated early.`,
    );
  }

  private toBacklog(sequence: Sequence, entry: Entry, placement: Placement, timeoutUs: number, now: number): void {
    let waiting = sequence.backlog;
    if (waiting === undefined) {
      waiting = { sequence, entries: [], expiresMs: Infinity, dropped: false };
      sequence.backlog = waiting;
      this.backlog.push(waiting);
    }
    waiting.entries.push(entry);
    placement.backlog = waiting;
    this.backlogRequests++;
    if (timeoutUs > 0) {
      waiting.expiresMs = Math.min(waiting.expiresMs, now + timeoutUs / 1000);
      this.armReaper(waiting.expiresMs);
    }
  }

  /** The ID is free for a new sequence (its END came, it was idle, or it ended by a cancel). */
  private forget(sequence: Sequence): void {
    if (this.sequences.get(sequence.key) === sequence) this.sequences.delete(sequence.key);
  }

  private occupy(slot: Slot, sequence: Sequence): void {
    // Its idle time counts from here: waiting in the backlog is not its client's silence (Triton
    // counts from its last request, so a sequence that waited longer is ended once it gets a slot).
    sequence.lastMs = nowMs();
    slot.sequence = sequence;
    slot.forceEnd = false;
    sequence.slot = slot;
    sequence.backlog = undefined;
  }

  /**
   * The slot's sequence is over: its slot goes to the oldest backlogged sequence (its
   * requests move into the slot's queue), else back to the free slots.
   */
  private release(slot: Slot): void {
    const ended = slot.sequence;
    if (ended !== undefined) ended.slot = undefined;
    slot.sequence = undefined;
    slot.forceEnd = false;
    let next = this.backlog.shift();
    while (next?.dropped === true) {
      this.droppedInBacklog--;
      next = this.backlog.shift();
    }
    if (next === undefined) {
      this.freeSlot(slot);
      return;
    }
    this.occupy(slot, next.sequence);
    this.backlogRequests -= next.entries.length;
    for (const entry of next.entries) {
      const placement = this.placements.get(entry)!;
      placement.backlog = undefined;
      placement.slot = slot;
      slot.queue.push(entry);
    }
  }

  private freeSlot(slot: Slot): void {
    // Kept ordered so the end holds the lowest slot index, then the lowest instance.
    const after = (other: Slot): boolean =>
      other.index > slot.index || (other.index === slot.index && other.instance > slot.instance);
    let low = 0;
    let high = this.free.length;
    while (low < high) {
      const middle = (low + high) >> 1;
      if (after(this.free[middle]!)) low = middle + 1;
      else high = middle;
    }
    this.free.splice(low, 0, slot);
  }

  /** Something changed in the slot (a request came, its sequence changed): the instance may run. */
  private slotChanged(slot: Slot): void {
    const oldest = this.batching.strategy.kind === "oldest";
    if (oldest) this.offer(slot);
    // A slot freed here may have taken a backlogged sequence: its first request is offered too.
    if (this.releaseIfForced(slot) && oldest) this.offer(slot);
    this.pump(slot.instance);
  }

  /** An ended sequence's slot is free once the requests it still had are gone (Triton's force-end marker). */
  private releaseIfForced(slot: Slot): boolean {
    if (!slot.forceEnd || slot.queue.length > 0) return false;
    this.release(slot);
    return true;
  }

  /** Starts the instance's next execution if it is free and has something to run. */
  private pump(instanceIndex: number): void {
    const instance = this.instances[instanceIndex]!;
    if (this.closed || instance.executing) return;
    clearTimeout(instance.timer);
    instance.timer = undefined;
    if (this.batching.strategy.kind === "direct") this.runDirect(instanceIndex, instance);
    else this.runOldest(instanceIndex, instance);
  }

  /**
   * Direct: one batch of the slots 0..the highest with a request, each slot its next request,
   * a null request where it has none (or its inputs cannot join the first's); with
   * minimum_slot_utilization, it waits for enough slots or the queue delay.
   */
  private runDirect(instanceIndex: number, instance: Instance): void {
    const strategy = this.batching.strategy;
    if (strategy.kind !== "direct") return;
    let highest = -1;
    let ready = 0;
    let oldestNs: bigint | undefined;
    let first: Entry | undefined;
    for (const slot of instance.slots) {
      const head = slot.queue[0];
      if (head === undefined) continue;
      first ??= head;
      ready++;
      highest = slot.index;
      if (oldestNs === undefined || head.enqueuedNs < oldestNs) oldestNs = head.enqueuedNs;
    }
    if (first === undefined) return;
    const delayNs = this.rules.maxQueueDelayNs;
    if (delayNs > 0n && strategy.minimumSlotUtilization > 0) {
      const waitedNs = nowNs() - oldestNs!;
      if (waitedNs <= delayNs && ready / this.rules.maxBatchSize < strategy.minimumSlotUtilization) {
        const waitMs = Math.max(1, Math.ceil(Number(delayNs - waitedNs) / 1e6));
        instance.timer = setTimeout(() => this.pump(instanceIndex), waitMs);
        return;
      }
    }
    const batch: Entry[] = [];
    const ended: Slot[] = [];
    for (const slot of instance.slots.slice(0, highest + 1)) {
      const head = slot.queue[0];
      if (head === undefined || !joins(first, head, this.rules.equalShapeInputs)) {
        batch.push(this.nullEntry(first));
        continue;
      }
      slot.queue.shift();
      batch.push(head);
      if (head.scheduled.sequence?.end === true) ended.push(slot);
    }
    this.execute(instanceIndex, batch);
    for (const slot of ended) this.release(slot);
    for (const slot of instance.slots) this.releaseIfForced(slot);
  }

  /** Oldest: the next dynamic batch of the heads offered (batch.ts's rules, preferred sizes and delay). */
  private runOldest(instanceIndex: number, instance: Instance): void {
    if (instance.offered.length === 0) return;
    const choice = nextBatch(instance.offered, this.rules, nowNs());
    if ("waitNs" in choice) {
      const waitMs = Math.max(1, Math.ceil(Number(choice.waitNs) / 1e6));
      instance.timer = setTimeout(() => this.pump(instanceIndex), waitMs);
      return;
    }
    instance.offered.splice(0, choice.run.length);
    this.execute(instanceIndex, choice.run);
  }

  /**
   * Oldest: offers the slot's next request to its instance's batch unless one of its requests
   * is offered or running; an END offered frees the slot (the next sequence's requests wait
   * until this one is done).
   */
  private offer(slot: Slot): void {
    if (slot.busy) return;
    const head = slot.queue.shift();
    if (head === undefined) return;
    slot.busy = true;
    this.placements.get(head)!.offered = true;
    const instance = this.instances[slot.instance]!;
    const strategy = this.batching.strategy;
    if (strategy.kind === "oldest" && strategy.preserveOrdering) {
      head.previous = instance.lastDone;
      instance.lastDone = head.done;
    }
    instance.offered.push(head);
    if (head.scheduled.sequence?.end === true) this.release(slot);
  }

  private execute(instanceIndex: number, batch: readonly Entry[]): void {
    const instance = this.instances[instanceIndex]!;
    instance.executing = true;
    for (const entry of batch) {
      if (entry.padding) continue;
      this.queuedCount--;
      const placement = this.placements.get(entry);
      if (placement?.slot !== undefined) this.slotOfRunning.set(entry, placement.slot);
      this.placements.delete(entry);
    }
    this.executions.start(instanceIndex, batch, () => {
      instance.executing = false;
      this.pump(instanceIndex);
    });
    for (const entry of batch) if (entry.padding) void this.runNull(entry);
  }

  /** Oldest: a request done frees its slot for the sequence's next one. */
  protected override onExecuted(entry: Entry): void {
    const slot = this.slotOfRunning.get(entry);
    if (slot === undefined || this.batching.strategy.kind !== "oldest") return;
    this.slotOfRunning.delete(entry);
    slot.busy = false;
    this.slotChanged(slot);
  }

  /** A null request, shaped as `like`: the scheduler's own request, counted in the batch, never a client's. */
  private nullEntry(like: Entry): Entry {
    let report: ExecutionReport | undefined;
    const scheduled: ScheduledRequest = {
      request: nullRequest(like.scheduled.request, this.batching, this.batched),
      batchSize: 1,
      place: like.scheduled.place,
      options: { signal: this.padding, deadline: Infinity, traceHeaders: {} },
      oneResponse: like.scheduled.oneResponse ?? false,
      started: (_enqueuedNs, _startedNs, execution) => (report = execution),
    };
    const entry = new Entry(scheduled, 0, true);
    this.reports.set(entry, () => report);
    return entry;
  }

  /** Runs a null request with its batch: its responses (or error) dropped, its time in the engine reported. */
  private async runNull(entry: Entry): Promise<void> {
    const startedNs = nowNs();
    try {
      for await (const response of this.executions.respond(entry)) void response;
    } catch {
      // A null request's failure is its batch's: the real requests report it.
    }
    this.reports
      .get(entry)?.()
      ?.report({
        computeInputNs: 0n,
        computeInferNs: nowNs() - startedNs,
        computeOutputNs: 0n,
      });
  }

  /**
   * A queued request leaves without running (cancelled, past its deadline, its caller gone):
   * as Triton, its sequence ends — the requests queued after it fail, those before it still
   * run, and its slot is freed once they have; a backlogged sequence fails whole.
   */
  protected leaveQueue(entry: Entry, error: unknown): void {
    const placement = this.placements.get(entry);
    if (entry.state !== "queued" || placement === undefined) return;
    const { sequence } = placement;
    this.forget(sequence);
    // Made only for the sequence's other requests (an error costs its stack): a flood of cancels stays cheap.
    const cancelled = (): DataPlaneError =>
      new DataPlaneError(
        "Cancelled",
        `sequence ${sequenceIdText(sequence.id)} of ${this.describe} ended: one of its requests was cancelled`,
      );
    const waiting = placement.backlog;
    if (waiting !== undefined) {
      this.dropFromBacklog(waiting);
      for (const other of waiting.entries) this.refuse(other, other === entry ? error : cancelled());
      return;
    }
    const slot = placement.slot!;
    this.refuse(entry, error);
    // Where it was in its slot's queue: the requests before it still run, as in Triton, which
    // sees a cancel when the request reaches the head of its slot.
    let position = 0;
    if (placement.offered === true) {
      const offered = this.instances[slot.instance]!.offered;
      offered.splice(offered.indexOf(entry), 1);
      slot.busy = false;
    } else {
      position = slot.queue.indexOf(entry);
      slot.queue.splice(position, 1);
    }
    if (slot.sequence === sequence) {
      for (const other of slot.queue.splice(position)) this.refuse(other, cancelled());
      // Free once the requests before it are gone (at once if there are none).
      slot.forceEnd = true;
    }
    this.slotChanged(slot);
  }

  /** Takes a sequence out of the backlog (its requests are the caller's to refuse). */
  private dropFromBacklog(waiting: Backlogged): void {
    waiting.dropped = true;
    waiting.sequence.backlog = undefined;
    this.backlogRequests -= waiting.entries.length;
    // Compacted once half of it is dropped: each removal costs O(1) amortized.
    if (++this.droppedInBacklog * 2 > this.backlog.length) {
      this.backlog = this.backlog.filter((one) => !one.dropped);
      this.droppedInBacklog = 0;
    }
  }

  /** A queued request fails without running. */
  private refuse(entry: Entry, error: unknown): void {
    if (entry.state !== "queued") return;
    this.placements.delete(entry);
    this.queuedCount--;
    unwatch(entry);
    entry.state = "ended";
    entry.refuse(error);
    entry.end();
  }

  /** The reaper's one timer, moved earlier when `atMs` is. */
  private armReaper(atMs: number): void {
    if (this.closed || atMs >= this.reaperAtMs) return;
    clearTimeout(this.reaper);
    this.reaperAtMs = atMs;
    this.reaper = setTimeout(() => this.reap(), Math.max(1, Math.ceil(atMs - nowMs())));
    // Never what keeps the process alive: a sequence left open must not hold up an exit.
    this.reaper.unref();
  }

  /**
   * Idle sequences in a slot are forgotten (their slot freed once their queued requests
   * are gone; a later request without START is refused); idle ones in the backlog are looked
   * at again shortly; backlogged sequences past their requests' `timeout` fail UNAVAILABLE.
   */
  private reap(): void {
    this.reaper = undefined;
    this.reaperAtMs = Infinity;
    const now = nowMs();
    const idleMs = this.idleMs;
    let next = Infinity;
    const forced: Slot[] = [];
    for (const sequence of this.sequences.values()) {
      const idleAt = sequence.lastMs + idleMs;
      if (idleAt > now) next = Math.min(next, idleAt);
      else if (sequence.slot !== undefined) {
        this.forget(sequence);
        sequence.slot.forceEnd = true;
        forced.push(sequence.slot);
      } else next = Math.min(next, now + BACKLOG_IDLE_RECHECK_MS);
    }
    const expired = new DataPlaneError("Unavailable", "timeout of the corresponding sequence has been expired");
    for (const waiting of this.backlog) {
      if (waiting.dropped) continue;
      if (waiting.expiresMs > now) {
        next = Math.min(next, waiting.expiresMs);
        continue;
      }
      this.dropFromBacklog(waiting);
      this.forget(waiting.sequence);
      for (const entry of waiting.entries) this.refuse(entry, expired);
    }
    for (const slot of forced) this.slotChanged(slot);
    this.armReaper(next);
  }
}
