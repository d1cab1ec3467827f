/**
 * Fluency tracking during training: per agent, the fluency of its completions next to the reward,
 * and one visible warning when it degrades (reward hacking usually shows here first: the reward
 * rises while the text turns into letter soup or strings of initials).
 *
 *   ref_nll        mean per-token NLL of a completion under the frozen starting model
 *   word_validity  share of letters in real, non-degenerate words (prose tasks; src/text/fluency-measures.ts)
 *   grammar_validity share of function-word trigrams found in English prose (src/text/grammar.ts)
 *   distinct_2, repetition, clause_length (words per clause)
 *
 * The warning compares a recent window with the agent's first window: word validity more than
 * 10 points below its starting value, grammar validity likewise, ref NLL more than 50% (and 0.25 nats) above it, or clauses less than half
 * as long (prose turned into lists of fragments).
 */
import { meanTextFluency, TEXT_FLUENCY_METRICS } from '../text/fluency-measures.js';
import { mean } from './advantage.js';
import type { SampledGroup } from './agent.js';

/** Fluency of one group of completions (one agent at one tree node). */
export const FLUENCY_METRICS = ['ref_nll', ...TEXT_FLUENCY_METRICS] as const;
export type GroupFluency = Partial<Record<(typeof FLUENCY_METRICS)[number], number>>;

export function groupFluency(g: SampledGroup, prose: boolean): GroupFluency {
  const out: GroupFluency = {};
  const nll = (g.refNll ?? []).filter((_, k) => g.completions[k].ids.length > 0);
  if (nll.length) out.ref_nll = mean(nll);
  if (prose) Object.assign(out, meanTextFluency(g.completions.map((c) => c.text)));
  return out;
}

/** Each metric's mean over several groups (metrics absent from every group are left out). */
export function meanFluency(groups: readonly GroupFluency[]): GroupFluency {
  const out: GroupFluency = {};
  for (const name of FLUENCY_METRICS) {
    const v = groups.flatMap((f) => (f[name] === undefined ? [] : [f[name] as number]));
    if (v.length) out[name] = mean(v);
  }
  return out;
}

/**
 * Thresholds of the degradation warning. A ref NLL rise must also exceed `refNllMinRise` nats:
 * code completions start near 0.05 nats/token, where +50% is noise, not drift.
 */
export const FLUENCY_WARNING = {
  window: 16,
  wordValidityDrop: 0.1,
  grammarValidityDrop: 0.1,
  refNllRise: 0.5,
  refNllMinRise: 0.25,
  clauseLengthRatio: 0.5,
} as const;

interface Seen {
  fluency: GroupFluency;
  example: string;
}

/** Watches each agent's fluency and returns a warning message once per agent when it degrades. */
export class FluencyMonitor {
  private readonly first: Seen[][];
  private readonly recent: Seen[][];
  private readonly warned: boolean[];

  constructor(numAgents: number) {
    this.first = Array.from({ length: numAgents }, () => []);
    this.recent = Array.from({ length: numAgents }, () => []);
    this.warned = new Array<boolean>(numAgents).fill(false);
  }

  /** Records one group; returns a warning the first time the agent's fluency has degraded. */
  observe(agent: number, fluency: GroupFluency, example: string): string | null {
    const W = FLUENCY_WARNING.window;
    const seen = { fluency, example };
    if (this.first[agent].length < W) this.first[agent].push(seen);
    this.recent[agent].push(seen);
    if (this.recent[agent].length > W) this.recent[agent].shift();
    if (this.warned[agent] || this.first[agent].length < W) return null;
    const start = meanFluency(this.first[agent].map((x) => x.fluency));
    const now = meanFluency(this.recent[agent].map((x) => x.fluency));
    const [wv0, wv, nll0, nll] = [start.word_validity, now.word_validity, start.ref_nll, now.ref_nll];
    const reasons: string[] = [];
    if (wv0 !== undefined && wv !== undefined && wv < wv0 - FLUENCY_WARNING.wordValidityDrop) reasons.push(`word validity fell from ${pct(wv0)} to ${pct(wv)}`);
    if (nll0 !== undefined && nll !== undefined && nll > nll0 * (1 + FLUENCY_WARNING.refNllRise) && nll - nll0 > FLUENCY_WARNING.refNllMinRise)
      reasons.push(`NLL under the starting model rose from ${nll0.toFixed(2)} to ${nll.toFixed(2)} nats/token`);
    const [gv0, gv] = [start.grammar_validity, now.grammar_validity];
    if (gv0 !== undefined && gv !== undefined && gv < gv0 - FLUENCY_WARNING.grammarValidityDrop)
      reasons.push(`grammar validity fell from ${pct(gv0)} to ${pct(gv)} (real words in no English order?)`);
    const [cl0, cl] = [start.clause_length, now.clause_length];
    if (cl0 !== undefined && cl !== undefined && cl < cl0 * FLUENCY_WARNING.clauseLengthRatio)
      reasons.push(`clauses shrank from ${cl0.toFixed(1)} to ${cl.toFixed(1)} words (lists of fragments?)`);
    if (reasons.length === 0) return null;
    this.warned[agent] = true;
    const ex = example.length > 300 ? `${example.slice(0, 300)}…` : example;
    return (
      `agent ${agent}: fluency is degrading (${reasons.join('; ')}) — the reward may be hacked; read the samples.\n` +
      `  recent completion: ${JSON.stringify(ex)}`
    );
  }
}

function pct(x: number): string {
  return `${(100 * x).toFixed(1)}%`;
}
