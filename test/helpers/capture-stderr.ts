import { readFileSync } from 'node:fs';

/**
 * Runs `fn` while keeping a copy of everything written to process.stderr (where the trainer and
 * the rollout client log), still passing it through. A failure gets the captured text appended to
 * its message, so a failing run's log is in the test report.
 */
export async function withStderr<T>(fn: () => Promise<T>): Promise<{ value: T; log: string }> {
  let log = '';
  const write = process.stderr.write;
  process.stderr.write = function (this: NodeJS.WriteStream, chunk: unknown, ...rest: unknown[]) {
    log += String(chunk);
    return Reflect.apply(write, this, [chunk, ...rest]) as boolean;
  } as typeof write;
  try {
    return { value: await fn(), log };
  } catch (e) {
    if (e instanceof Error) e.message += `\n--- stderr of the run ---\n${log}`;
    throw e;
  } finally {
    process.stderr.write = write;
  }
}

/** The JSON lines of a file (metrics.jsonl, samples.jsonl). */
export function readJsonLines<T = Record<string, number>>(file: string): T[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as T);
}
