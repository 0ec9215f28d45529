import { sequenceKey, type SequenceId } from "../../tensors/parameters.js";

/**
 * Which upstream holds each open sequence (Triton's sequence batching keeps a sequence's
 * state on one server), bounded: a sequence idle longer than `idleMs` is forgotten (as
 * Triton drops a sequence idle past max_sequence_idle_microseconds), and past `capacity`
 * the least recently used one goes. A client that never sends sequence_end cannot grow it
 * without bound. Entries are kept in the order of last use, so expiry looks only at the
 * oldest ones. Keyed by the typed correlation ID: the integer 5 and the string "5" are
 * different sequences (as Triton's).
 */
export class SequenceAffinity<Endpoint> {
  private readonly bound = new Map<string, { endpoint: Endpoint; lastUsed: number }>();

  constructor(
    private readonly idleMs: number,
    private readonly capacity: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** The endpoint the sequence is bound to, if it is still open; using it keeps it open. */
  get(sequence: SequenceId): Endpoint | undefined {
    this.expire();
    const key = sequenceKey(sequence);
    const entry = this.bound.get(key);
    if (entry === undefined) return undefined;
    this.touch(key, entry.endpoint);
    return entry.endpoint;
  }

  bind(sequence: SequenceId, endpoint: Endpoint): void {
    this.expire();
    this.touch(sequenceKey(sequence), endpoint);
    if (this.bound.size > this.capacity) this.bound.delete(this.bound.keys().next().value!);
  }

  /** The sequence ended (sequence_end): its binding goes. */
  end(sequence: SequenceId): void {
    this.bound.delete(sequenceKey(sequence));
  }

  get size(): number {
    return this.bound.size;
  }

  private touch(key: string, endpoint: Endpoint): void {
    this.bound.delete(key);
    this.bound.set(key, { endpoint, lastUsed: this.now() });
  }

  private expire(): void {
    const oldestAllowed = this.now() - this.idleMs;
    for (const [key, { lastUsed }] of this.bound) {
      if (lastUsed >= oldestAllowed) break;
      this.bound.delete(key);
    }
  }
}
