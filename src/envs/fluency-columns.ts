/**
 * Fluency columns of the eval table, for every method alike (trained team and baselines): each
 * role's final completion is scored as that role's answer to the environment's own prompt for the
 * item, so the columns compare methods on the same footing.
 *
 *   ref_nll        mean per-token NLL under the starting model (the base model of that role),
 *                  of the completion re-tokenised after the role's turn-1 prompt
 *   word_validity, grammar_validity, distinct_2, repetition   (prose environments; src/text/fluency-measures.ts), in %
 *   clause_length  mean words per clause (prose environments), in words
 *
 * The table shows the worst role (highest NLL, lowest validity): hacking usually hits one agent;
 * per-role values are kept as `<metric>/agent_i`.
 */
import { noGrad } from '../engine/tensor.js';
import { completionLogprobs, groupLogprobs } from '../model/logprobs.js';
import type { LanguageModel } from '../model/pretrained.js';
import { formattersFor, type Prompt, type Task } from '../rl/task.js';
import { meanTextFluency, TEXT_FLUENCY_METRICS } from '../text/fluency-measures.js';
import type { EpisodeResult } from './environment.js';

/** Mean per-token NLL of `completion` after `prompt`; the prompt is left-truncated to fit. */
export function completionNll(lm: LanguageModel, prompt: Prompt, completion: string): number | null {
  const c = lm.encode(completion);
  if (c.length === 0) return null;
  const ctx = lm.model.maxPositions;
  const completionIds = c.slice(0, ctx - 1);
  const promptIds = lm.tokenizer.promptIds(prompt).slice(-(ctx - completionIds.length));
  // Without a prompt nothing predicts the first token: score the rest after it.
  const seq = promptIds.length ? { prompt: promptIds, completion: completionIds } : { prompt: completionIds.slice(0, 1), completion: completionIds.slice(1) };
  if (seq.completion.length === 0) return null;
  const r = noGrad(() => completionLogprobs(lm.model, [seq]));
  let s = 0;
  for (let t = 0; t < r.sequenceOf.length; t++) s -= r.tokenLogprobs.data[t];
  return s / r.sequenceOf.length;
}

/**
 * `completionNll` of several completions of one prompt (an item's samples), the prompt computed
 * once (groupLogprobs); equal to scoring each alone to float rounding. Where the prompt would have
 * to be truncated, or is empty, each is scored alone.
 */
export function completionNlls(lm: LanguageModel, prompt: Prompt, completions: readonly string[]): (number | null)[] {
  const ids = completions.map((c) => lm.encode(c));
  const promptIds = lm.tokenizer.promptIds(prompt);
  const longest = Math.max(0, ...ids.map((c) => c.length));
  if (promptIds.length === 0 || promptIds.length + longest > lm.model.maxPositions) return completions.map((c) => completionNll(lm, prompt, c));
  const r = noGrad(() => groupLogprobs(lm.model, promptIds, ids));
  const sums = new Array<number>(ids.length).fill(0);
  for (let t = 0; t < r.sequenceOf.length; t++) sums[r.sequenceOf[t]] -= r.tokenLogprobs.data[t];
  return ids.map((c, b) => (c.length > 0 ? sums[b] / c.length : null));
}

export function fluencyColumns<Item>(
  results: readonly EpisodeResult[],
  items: readonly Item[],
  task: Task<Item>,
  baseModels: readonly LanguageModel[],
  prose: boolean,
): Record<string, number> {
  const N = Math.max(0, ...results.map((r) => r.completions.length));
  // A baseline with another team size (e.g. single_agent for a 2-agent task) was not prompted
  // with the task's per-agent formatters: no reference NLL for it, the text columns still apply.
  const f = task.formatters;
  const formatters = Array.isArray(f) && f.length !== N ? null : formattersFor(task, N);
  const out: Record<string, number> = {};
  const worst: Record<string, number[]> = Object.fromEntries(['ref_nll', ...TEXT_FLUENCY_METRICS].map((k) => [k, []]));
  for (let i = 0; i < N; i++) {
    const lm = baseModels[i] ?? baseModels[0];
    const nll: number[] = [];
    if (formatters) {
      // An item's samples (eval --samples-per-item) share its prompt: scored as one group.
      const byItem = new Map<number, string[]>();
      for (const r of results) {
        const group = byItem.get(r.index) ?? [];
        if (group.length === 0) byItem.set(r.index, group);
        group.push(r.completions[i] ?? '');
      }
      for (const [index, completions] of byItem) for (const v of completionNlls(lm, formatters[i](items[index]), completions)) if (v !== null) nll.push(v);
    }
    if (nll.length) {
      out[`ref_nll/agent_${i}`] = nll.reduce((a, b) => a + b, 0) / nll.length;
      worst.ref_nll.push(out[`ref_nll/agent_${i}`]);
    }
    if (prose)
      for (const [k, v] of Object.entries(meanTextFluency(results.map((r) => r.completions[i] ?? '')))) {
        const shown = k === 'clause_length' ? v : 100 * v;
        out[`${k}/agent_${i}`] = shown;
        worst[k].push(shown);
      }
  }
  // The worst role: the highest NLL and repetition, the lowest of the rest.
  for (const [k, v] of Object.entries(worst)) if (v.length) out[k] = k === 'ref_nll' || k === 'repetition' ? Math.max(...v) : Math.min(...v);
  return out;
}
