/**
 * Skips for tests that need an optional stack or something of the machine (the PyTorch learner,
 * llama.cpp, chromium, root, a built corpus): call these instead of `t.skip` or `{ skip }`.
 *
 * Locally a test skips as before, with its reason. Under CI (CI set, not "false" or "0") a skip is
 * allowed only when its id is on test/skip-allowlist.json: otherwise the test fails with the reason,
 * so a broken install cannot turn into a green run. Each reason ends in `[skip: <id>]`;
 * scripts/skip-report.mjs (run by scripts/test.sh) lists every skip of a run at its end, and in CI
 * fails the run on a skip without an allowed id (a bare `t.skip` or `{ skip }` included).
 */
import { readFileSync } from 'node:fs';
import { type TestContext, test } from 'node:test';

interface Allowed {
  id: string;
  reason: string;
  /** Allowed only while this environment variable is set. */
  env?: string;
}

const ALLOWLIST: Allowed[] = JSON.parse(readFileSync(new URL('../skip-allowlist.json', import.meta.url), 'utf8')).allowed;

export const inCI = (): boolean => !['', '0', 'false'].includes(process.env.CI ?? '');

/** The allow-list entry that lets `id` skip in CI now, if any. */
export function allowedInCI(id: string): Allowed | undefined {
  const entry = ALLOWLIST.find((e) => e.id === id);
  return entry && (entry.env === undefined || (process.env[entry.env] ?? '') !== '') ? entry : undefined;
}

const tagged = (id: string, reason: string) => `${reason} [skip: ${id}]`;
const refused = (id: string, reason: string) =>
  new Error(`required in CI, but: ${reason.replace(/^SKIPPED: /, '')} (skip id "${id}" is not allowed in CI by test/skip-allowlist.json)`);
const failing = new Set<string>();

/**
 * For `{ skip: optionalSkip(id, reason) }` on a test or a describe: the tagged reason, or false when
 * `reason` is empty. In CI, unless `id` is allowed, a failing test "<id> is required in CI" (with the
 * reason) is added beside it; the tests themselves still skip, so they do not fail for the same
 * missing piece in less readable ways.
 */
export function optionalSkip(id: string, reason: string | false | null | undefined): string | false {
  if (!reason) return false;
  if (inCI() && !allowedInCI(id) && !failing.has(id)) {
    failing.add(id);
    test(`${id} is required in CI`, () => {
      throw refused(id, reason);
    });
  }
  return tagged(id, reason);
}

/** Inside a test: skips it with `reason`; in CI, unless `id` is allowed, fails it with the reason. */
export function skipTest(t: TestContext, id: string, reason: string): void {
  if (inCI() && !allowedInCI(id)) throw refused(id, reason);
  t.skip(tagged(id, reason));
}
