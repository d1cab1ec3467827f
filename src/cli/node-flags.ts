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
 * --single-threaded-gc: V8's garbage collector otherwise marks and sweeps on helper threads. With
 * the kernels on every core (the default thread count), a helper takes a core from a kernel thread
 * and every parallel kernel then waits at its barrier for the descheduled slice. Training
 * allocates ~100 MB of tensors a step, and V8 answers that much external memory with about two
 * mark-compacts a step, so this was the CLI's biggest loss: two threads, `measureSize` with the
 * CLI's modules loaded, without / with the flag: 1m training 13,289 / 17,199 and 13,007 / 16,943
 * tokens/s, bf16 18,741 / 20,358; sampling b8 21,538 / 22,583, b32 25,204 / 28,465; 10m training
 * 2,375 / 2,857 and 2,623 / 2,844, bf16 3,625 / 4,311, sampling b8 even, b32 4,786 / 4,612 and
 * 5,022 / 4,719 (the one loss, 4-6%). (`--no-concurrent-marking --no-parallel-marking` alone
 * crashed Node 20's V8 in a mark-compact; the umbrella flag did not.)
 */
export const NODE_FLAGS = ['--initial-old-space-size=128', '--single-threaded-gc'];

/** Node arguments for a child process of ours: this process's own, plus the NODE_FLAGS it lacks. */
export function childExecArgv(): string[] {
  const name = (flag: string) => flag.split('=')[0];
  const have = new Set(process.execArgv.map(name));
  return [...process.execArgv, ...NODE_FLAGS.filter((f) => !have.has(name(f)))];
}
