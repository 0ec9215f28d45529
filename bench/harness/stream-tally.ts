/**
 * What the stream load generators (stream-load.ts over gRPC, sse-load.ts over SSE) count:
 * responses, errors and the gap between a stream's consecutive responses, only inside the
 * measured window, which opens after the warm-up. At its end one JSON line is printed
 * (responses, errors, p50/p99 gap in ms) and the process exits.
 */
export class StreamTally {
  private measuring = false;
  private responses = 0;
  private errors = 0;
  private readonly gaps: number[] = [];

  /** A response arrived; `gapMs` since the stream's previous one (undefined for its first). */
  response(gapMs: number | undefined): void {
    if (!this.measuring) return;
    this.responses++;
    if (gapMs !== undefined) this.gaps.push(gapMs);
  }

  error(): void {
    if (this.measuring) this.errors++;
  }

  /** Opens the window after `warmupSeconds`, closes it `durationSeconds` later, reports and exits. */
  measure(warmupSeconds: number, durationSeconds: number, onEnd: () => void = () => undefined): void {
    setTimeout(() => {
      this.measuring = true;
      setTimeout(() => {
        this.measuring = false;
        onEnd();
        this.gaps.sort((a, b) => a - b);
        const at = (share: number): number =>
          this.gaps[Math.min(this.gaps.length - 1, Math.floor(share * this.gaps.length))] ?? NaN;
        console.log(
          JSON.stringify({ responses: this.responses, errors: this.errors, p50Ms: at(0.5), p99Ms: at(0.99) }),
        );
        process.exit(0);
      }, durationSeconds * 1000);
    }, warmupSeconds * 1000);
  }
}
