/**
 * The V8 flags magrpo's command line runs with: the shebang of main.ts, scripts/main.sh (`npm
 * start`), and every Node child process magrpo starts for itself (bench workers, local servers).
 *
 * --initial-old-space-size=128: with the CLI's modules loaded (about 20 MB of heap), V8 sizes its
 * old generation so tightly that its slack stays below the young generation's capacity, and
 * decoding, which allocates fast, keeps it in incremental marking: frequent mark-compacts on
 * helper threads that take the second core from the kernels. The flag costs up to 128 MB of
 * garbage before the first full collection. docs/benchmarks.md ("Engine design measurements") has
 * the A/B figures.
 *
 * Not used: --single-threaded-gc. It speeds small-model training (the GC's helper threads no
 * longer take a core) but the main thread alone then frees garbage later, which raises peak RSS
 * severalfold and slows large-model training; fewer fresh buffers per step is the fix.
 */
export const NODE_FLAGS = ['--initial-old-space-size=128'];

/** Node arguments for a child process of ours: this process's own, plus the NODE_FLAGS it lacks. */
export function childExecArgv(): string[] {
  const name = (flag: string) => flag.split('=')[0];
  const have = new Set(process.execArgv.map(name));
  return [...process.execArgv, ...NODE_FLAGS.filter((f) => !have.has(name(f)))];
}
