/**
 * The coding evaluation table (docs/environments.md "Coding metrics"):
 *
 *   structure, syntax, tests, cooperation, return   the paper's normalised reward components, mean
 *                                                   over episodes as % of their maxima (1, 0.5, 1,
 *                                                   1.5, 4); `return` is the raw component sum, so a
 *                                                   reward processor's shift does not leak in
 *   pass@k                                          unbiased pass@k in % (Chen et al., 2021) over
 *                                                   the samples of each item (episodes sharing an
 *                                                   `index`), for k in 1, 3, 5, 10 up to the
 *                                                   smallest sample count; a sample passes when its
 *                                                   tests component is 1 (every extracted assert)
 *   response_s, output_tokens                       mean per episode
 */

import type { EpisodeResult } from '../environment.js';
import { passAtK } from '../environment.js';
import { COMPONENT_MAX } from './reward.js';

const PASS_KS = [1, 3, 5, 10];

const part = (e: EpisodeResult, name: string) => e.components[name] ?? 0;
const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);

export function codingMetrics(episodes: readonly EpisodeResult[]): Record<string, number> {
  const pct = (name: keyof typeof COMPONENT_MAX) => (100 * mean(episodes.map((e) => part(e, name)))) / COMPONENT_MAX[name];
  const raw = episodes.map((e) => ['structure', 'syntax', 'tests', 'cooperation', 'penalty'].reduce((s, k) => s + part(e, k), 0));
  return {
    structure: pct('structure'),
    syntax: pct('syntax'),
    tests: pct('tests'),
    cooperation: pct('cooperation'),
    return: (100 * mean(raw)) / COMPONENT_MAX.return,
    ...passAtKMetrics(episodes),
    response_s: mean(episodes.map((e) => e.responseSeconds)),
    output_tokens: mean(episodes.map((e) => e.outputTokens)),
  };
}

/** pass@k in % for every k the per-item sample counts allow. */
export function passAtKMetrics(episodes: readonly EpisodeResult[]): Record<string, number> {
  const byItem = new Map<number, { n: number; c: number }>();
  for (const e of episodes) {
    const s = byItem.get(e.index) ?? { n: 0, c: 0 };
    byItem.set(e.index, { n: s.n + 1, c: s.c + (part(e, 'tests') === 1 ? 1 : 0) });
  }
  if (byItem.size === 0) return {};
  const minN = Math.min(...[...byItem.values()].map((s) => s.n));
  const out: Record<string, number> = {};
  for (const k of PASS_KS.filter((k) => k <= minN)) out[`pass@${k}`] = 100 * mean([...byItem.values()].map((s) => passAtK(s.n, s.c, k)));
  return out;
}
