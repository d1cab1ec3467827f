/**
 * The V8 flags magrpo's command line runs with: the shebang of main.ts, scripts/main.sh (`npm
 * start`), and every Node child process magrpo starts for itself (bench workers, local servers).
 *
 * --initial-old-space-size=128: with the CLI's modules loaded (about 20 MB of heap), V8 sized its
 * old generation so tightly that its slack stayed below the young generation's capacity, and
 * decoding, which allocates fast, kept it in incremental marking: a mark-compact every ~50 ms,
 * on helper threads that take the second core from the kernels. Two threads, 10m, `bench
 * --worker` with / without the flag: sampling b8 2,537 vs 1,973 tokens/s, b32 4,667 vs 3,246
 * (bf16 3,217 vs 2,298 and 4,941 vs 3,249), training 2,477 vs 2,412. On one thread there was no
 * difference. It costs up to 128 MB of garbage before the first full collection.
 *
 * Tried and left out: --single-threaded-gc. Training allocates ~100 MB of tensors a step and V8
 * answers with about two mark-compacts a step, whose helper threads take a core from the kernels;
 * with the flag, CLI-loaded 1m training went from ~13k to ~17k tokens/s in A/B runs, but the full
 * bench (2026-11-27 13:30) showed the cost: peak RSS 295 -> 628 MB at 1m, 557 -> 1,621 MB at 10m,
 * 3,950 -> 5,939 MB at 124m (the main thread alone frees the garbage later), 124m training 233 ->
 * 205 tokens/s and 10m sampling b8 3,182 -> 2,694. Fewer fresh buffers per step is the fix.
 */
export const NODE_FLAGS = ['--initial-old-space-size=128'];

/** Node arguments for a child process of ours: this process's own, plus the NODE_FLAGS it lacks. */
export function childExecArgv(): string[] {
  const name = (flag: string) => flag.split('=')[0];
  const have = new Set(process.execArgv.map(name));
  return [...process.execArgv, ...NODE_FLAGS.filter((f) => !have.has(name(f)))];
}
