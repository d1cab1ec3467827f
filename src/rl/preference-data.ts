/**
 * Preference pairs of joint actions for a reward model (rl/reward-model.ts): read from a JSONL
 * file, or sampled from the team and labelled by the task's joint reward as CoMLRL's MARLHF does
 * (`_build_preference_dataset`, comlrl/trainers/preference/madpo.py): per training item every agent
 * samples C candidates of its prompt, joint action k = (y_1^k, …, y_N^k) (aligned) gets the joint
 * reward r^k, and the pairs (w, l) with r^w > r^l are chosen by pair_selection (selectPairs).
 *
 * A file row is one pair, one string per agent in each list:
 *   {"prompts": ["…", "…"], "chosen": ["…", "…"], "rejected": ["…", "…"]}
 * (TRL's preference columns, made multi-agent).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { Rng } from '../engine/rng.js';
import type { LanguageModel } from '../model/pretrained.js';
import { selectPairs } from './algorithms/madpo.js';
import type { PreferencePair } from './reward-model.js';
import { computeReward, formatPrompt, type TaskContext } from './rollout.js';
import { formattersFor, promptText, type Task } from './task.js';

const FIELDS = ['prompts', 'chosen', 'rejected'] as const;

/** The pairs of a JSONL file; a bad row is an error naming the file, the line and the field. */
export function readPreferencePairs(file: string): PreferencePair[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new Error(`preference file ${file}: cannot be read (${(e as Error).message})`);
  }
  const pairs: PreferencePair[] = [];
  let agents: number | null = null;
  for (const [n, line] of text.split('\n').entries()) {
    if (line.trim() === '') continue;
    const at = `${file}:${n + 1}`;
    let row: unknown;
    try {
      row = JSON.parse(line);
    } catch (e) {
      throw new Error(`${at}: not JSON (${(e as Error).message}); each line is {"prompts": [...], "chosen": [...], "rejected": [...]}`);
    }
    if (typeof row !== 'object' || row === null || Array.isArray(row)) throw new Error(`${at}: a row must be an object with prompts, chosen and rejected`);
    const r = row as Record<string, unknown>;
    for (const f of FIELDS) {
      if (!(f in r)) throw new Error(`${at}: field "${f}" is missing; each row needs prompts, chosen and rejected (one string per agent)`);
      const v = r[f];
      if (!Array.isArray(v) || v.length === 0 || !v.every((x) => typeof x === 'string'))
        throw new Error(`${at}: field "${f}" must be a non-empty list of strings (one per agent)`);
      agents ??= v.length;
      if (v.length !== agents) throw new Error(`${at}: field "${f}" has ${v.length} entries, earlier rows have ${agents} agents`);
    }
    pairs.push({ prompts: r.prompts as string[], chosen: r.chosen as string[], rejected: r.rejected as string[] });
  }
  if (pairs.length === 0) throw new Error(`preference file ${file}: no pairs (one JSON object per line)`);
  return pairs;
}

export function writePreferencePairs(file: string, pairs: readonly PreferencePair[]): void {
  writeFileSync(file, pairs.map((p) => `${JSON.stringify({ prompts: p.prompts, chosen: p.chosen, rejected: p.rejected })}\n`).join(''));
}

/** How pairs are sampled (CoMLRL MADPOConfig names, which MARLHFConfig inherits). */
export interface PairSamplingOptions {
  /** C, candidates each agent samples per item (reference default 80). */
  preference_num_candidates: number;
  /** Pairs kept per item (null: every pair; reference default 16). */
  preference_pairs_per_sample: number | null;
  pair_selection: 'reward_gap' | 'all' | 'random';
  max_new_tokens: number;
  temperature: number;
  top_p: number;
  top_k: number | null;
  stop_strings: string[];
  seed: number;
}

/**
 * Pairs labelled by the task's joint reward (the module header), one agent model per formatter.
 * The config's reward_processor is applied as in training (only the order of rewards matters).
 */
export async function samplePreferencePairs<Item>(
  task: Task<Item>,
  agents: readonly LanguageModel[],
  o: PairSamplingOptions,
  onItem?: (done: number, total: number, pairs: number) => void,
): Promise<PreferencePair[]> {
  const rng = new Rng(o.seed);
  const ctx: TaskContext<Item> = {
    task,
    formatters: formattersFor(task, agents.length),
    config: { external_prompt_passthrough: false, reward_processor: null },
    itemIndex: 0,
  };
  const pairs: PreferencePair[] = [];
  for (const [index, item] of task.dataset.entries()) {
    ctx.itemIndex = index;
    const prompts = agents.map((_, i) => formatPrompt(ctx, i, item, null));
    const texts = prompts.map(promptText);
    const candidates = agents.map((lm, i) =>
      lm
        .sample(
          Array.from({ length: o.preference_num_candidates }, () => prompts[i]),
          { maxNewTokens: o.max_new_tokens, temperature: o.temperature, topP: o.top_p, topK: o.top_k, stopStrings: o.stop_strings, rng },
        )
        .map((s) => s.text),
    );
    const rewards: number[] = [];
    for (let k = 0; k < o.preference_num_candidates; k++) {
      const completions = candidates.map((c) => c[k]);
      rewards.push((await computeReward(ctx, { completions, prompts: texts, item, turn: 0 })).reward);
    }
    for (const [w, l] of selectPairs(rewards, o.pair_selection, o.preference_pairs_per_sample, rng))
      pairs.push({ prompts: texts, chosen: candidates.map((c) => c[w]), rejected: candidates.map((c) => c[l]) });
    onItem?.(index + 1, task.dataset.length, pairs.length);
  }
  return pairs;
}
