/**
 * MADPO, offline joint-factorized DPO (CoMLRL comlrl/trainers/preference/madpo.py; DPO: Rafailov
 * et al., Direct Preference Optimization, arXiv 2305.18290). Single turn, aligned joint actions.
 *
 * 1. Every training item, once, before any update: each agent samples C = preference_num_candidates
 *    completions of its prompt; joint action k = (y_1^k, …, y_N^k) gets the joint reward r^k.
 * 2. Pairs (w, l) with r^w > r^l, chosen by pair_selection (selectPairs).
 * 3. num_train_epochs passes over the shuffled pairs, one optimizer step per agent per batch of
 *    train_batch_size pairs. With Δ_j = log π_j(y_j^w | p_j) − log π_j(y_j^l | p_j) (sums over
 *    every completion token) and Δ_ref the same under the starting policies, agent i minimises
 *
 *      L_i = −mean_pairs log σ(β · (Δ_i + Σ_{j≠i} sg(Δ_j) − Σ_j Δ_ref,j))
 *
 *    the others' Δ_j computed with the current weights, without gradient, before the step. The
 *    pairs are sampled before any update, so the sampling-time log-probs are the starting
 *    policy's: Δ_ref comes from them and needs no reference model. `reference_free: true` drops
 *    Δ_ref, which is the reference library's loss.
 */
import { z } from 'zod';
import { add, exp, log, scale, weightedSum } from '../../engine/ops.js';
import type { Rng } from '../../engine/rng.js';
import { tensor } from '../../engine/tensor.js';
import type { Algorithm, KeyProblem, LossSample, LossTerms, PreferenceTerms, ScoredTokens } from './algorithm.js';

/** MADPO's own keys (CoMLRL MADPOConfig names; TRL's DPOConfig name for reference_free). */
export const MADPO_OPTIONS = {
  preference_num_candidates: z
    .number()
    .int()
    .min(2)
    .max(4096)
    .default(80)
    .describe('madpo: C, completions each agent samples per prompt (the joint actions pairs are drawn from); num_generations follows it'),
  preference_pairs_per_sample: z
    .number()
    .int()
    .min(1)
    .nullable()
    .default(16)
    .describe('madpo: preference pairs kept per prompt (null = every pair; must be null with pair_selection all)'),
  pair_selection: z
    .enum(['reward_gap', 'all', 'random'])
    .default('reward_gap')
    .describe('madpo: which pairs (w, l) with r_w > r_l are kept: largest reward gap first, all of them, or a random choice'),
  dpo_beta: z.number().positive().default(0.1).describe('madpo: β of the DPO loss'),
  reference_free: z
    .boolean()
    .default(false)
    .describe("madpo (TRL's name): drop the starting policies' log-ratio from the loss, as the reference library does (false = DPO's loss)"),
};

type MadpoOptions = z.output<z.ZodObject<typeof MADPO_OPTIONS>>;

/**
 * The pairs (winner, loser) of one prompt's joint rewards (CoMLRL `_select_preference_pair_indices`):
 * every ordered (i, j) with r_i > r_j (ties give none), then reward_gap: largest r_i − r_j first
 * (ties in candidate order); all: candidate order; random: shuffled. All but `all` keep `limit`.
 */
export function selectPairs(rewards: readonly number[], mode: MadpoOptions['pair_selection'], limit: number | null, rng: Rng): [number, number][] {
  let pairs: { gap: number; w: number; l: number }[] = [];
  for (let w = 0; w < rewards.length; w++) {
    for (let l = 0; l < rewards.length; l++) {
      const gap = rewards[w] - rewards[l];
      if (w !== l && gap > 0) pairs.push({ gap, w, l });
    }
  }
  if (mode === 'random') rng.shuffle(pairs);
  else if (mode === 'reward_gap')
    pairs = pairs
      .map((p, k) => ({ p, k }))
      .sort((a, b) => b.p.gap - a.p.gap || a.k - b.k)
      .map((x) => x.p);
  if (mode !== 'all' && limit !== null) pairs = pairs.slice(0, limit);
  return pairs.map((p) => [p.w, p.l]);
}

/** Σ of a completion's per-token log-probs. */
const total = (lp: readonly number[]) => lp.reduce((a, b) => a + b, 0);

/**
 * One pair's loss for one agent: −log σ(β · (Δ_own + otherDelta − refDelta)) × weight, where
 * Δ_own = Σ_t log π(y_w,t) − Σ_t log π(y_l,t) (an empty completion's sum is 0).
 */
export function preferenceLoss(lp: ScoredTokens, s: LossSample, weight: number): LossTerms {
  const p = s.preference as PreferenceTerms;
  const sign = Array.from(lp.sequenceOf, (g) => (g === 0 ? 1 : -1));
  // u = −β · (Δ_own + other − ref); −log σ(−u) = softplus(u), written stably on either side of 0
  const u = add(scale(weightedSum(lp.tokenLogprobs, sign), -p.beta), tensor([-p.beta * (p.otherDelta - p.refDelta)]));
  const one = tensor([1]);
  const softplus = u.data[0] > 0 ? add(u, log(add(exp(scale(u, -1)), one))) : log(add(exp(u), one));
  return { loss: scale(softplus, weight), clipped: 0, klSum: 0, klTokens: 0 };
}

export const MADPO: Algorithm<MadpoOptions> = {
  name: 'madpo',
  options: MADPO_OPTIONS,
  // The tree samples C completions per agent: num_generations is C.
  defaults: (section) => ({ num_generations: section.preference_num_candidates ?? MADPO_OPTIONS.preference_num_candidates.parse(undefined) }),
  schedule: 'offline',
  check(c) {
    const out: KeyProblem[] = [];
    const no = (path: string[], message: string) => out.push({ path, message });
    if (c.num_turns !== 1) no(['num_turns'], `madpo is single-turn (num_turns 1), got ${c.num_turns}`);
    if (c.joint_mode !== 'aligned') no(['joint_mode'], 'madpo pairs aligned joint actions: set joint_mode aligned');
    if (c.num_generations !== c.preference_num_candidates)
      no(['num_generations'], `madpo samples preference_num_candidates (${c.preference_num_candidates}) completions per prompt; set that key instead`);
    if (c.pair_selection === 'all' && c.preference_pairs_per_sample !== null)
      no(['preference_pairs_per_sample'], 'pair_selection all keeps every pair: set preference_pairs_per_sample to null');
    if (c.lr_scheduler !== 'constant')
      no(['lr_scheduler'], 'madpo knows its number of optimizer steps only once the pairs are drawn: use lr_scheduler constant (warmup_steps works)');
    return out;
  },
  samples(node, c, rng) {
    const pairs = selectPairs(node.rewards, c.pair_selection, c.preference_pairs_per_sample, rng);
    const delta = (g: (typeof node.groups)[number], w: number, l: number) => total(g.completions[w].logprobs) - total(g.completions[l].logprobs);
    return node.groups.map((group) =>
      pairs.map(([w, l]) => ({
        promptIds: group.promptIds,
        completions: [group.completions[w].ids, group.completions[l].ids],
        advantages: [],
        oldLogprobs: [group.completions[w].logprobs, group.completions[l].logprobs],
        preference: {
          beta: c.dpo_beta,
          otherDelta: 0,
          refDelta: c.reference_free ? 0 : node.groups.reduce((a, g) => a + delta(g, w, l), 0),
        },
      })),
    );
  },
  samplesPerItem: (c) => {
    const all = (c.preference_num_candidates * (c.preference_num_candidates - 1)) / 2;
    return c.pair_selection === 'all' || c.preference_pairs_per_sample === null ? all : Math.min(all, c.preference_pairs_per_sample);
  },
  teamBatch(batch, logprobs) {
    // Δ[a][b]: agent a's log-ratio on pair b under its current weights
    const delta = logprobs.map((perAgent) => perAgent.map(([w, l]) => w - l));
    const joint = batch[0].map((_, b) => delta.reduce((acc, d) => acc + d[b], 0));
    const samples = batch.map((mine, a) =>
      mine.map((s, b) => ({ ...s, preference: { ...(s.preference as PreferenceTerms), otherDelta: joint[b] - delta[a][b] } })),
    );
    const z = batch[0].map((s, b) => (s.preference as PreferenceTerms).beta * (joint[b] - (s.preference as PreferenceTerms).refDelta));
    return {
      samples,
      metrics: { 'preference/accuracy': z.filter((x) => x > 0).length / z.length, 'preference/margin': z.reduce((x, y) => x + y, 0) / z.length },
    };
  },
  loss: (lp, s, _settings, weight) => preferenceLoss(lp, s, weight),
};
