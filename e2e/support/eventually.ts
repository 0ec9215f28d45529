/** Polls until `check` passes (it throws until then) or the time runs out; rethrows its last error. */
export async function eventually<T>(check: () => Promise<T> | T, timeoutMs = 15_000, intervalMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, intervalMs));
    }
  }
}
