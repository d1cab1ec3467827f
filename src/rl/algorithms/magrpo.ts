/**
 * The MAGRPO family (arXiv 2508.04652; CoMLRL comlrl/trainers/reinforce/): one online
 * policy-gradient update over the rollout tree, four baselines (docs/algorithms.md).
 *
 *   magrpo       A = R − mean(R)               MAGRPOTrainer
 *   mareinforce  A = R                         MAREINFORCETrainer
 *   marloo       A = R − mean_{j≠g} R_j        MARLOOTrainer
 *   maremax      A = R − max(R)                MAReMaxTrainer
 *
 * Per node and agent i: R_i (aligned R, or cross credit), optional KL shaping R − β·KL, the
 * advantages, and the loss L = −(1/G') Σ_g A_g · Σ_t c_t log π_i(y_g,t | p_i, y_g,<t) over the G'
 * non-empty completions (c_t per loss_aggregation), PPO-clipped when ppo_clip_eps is set, plus
 * β·k3 KL with `reference_kl_mode: loss`.
 */
import { z } from 'zod';
import { add, clamp, exp, minimum, mul, scale, sub, weightedSum } from '../../engine/ops.js';
import { type Tensor, tensor } from '../../engine/tensor.js';
import { advantages, agentReturns, klK3, perAgent, shapeWithKl } from '../advantage.js';
import type { Algorithm, LossSample, LossSettings, LossTerms, ScoredNode, ScoredTokens } from './algorithm.js';

/** Upper bound of ppo_epochs (a typo such as 1e9 is a config error, not a run that never ends). */
export const MAX_PPO_EPOCHS = 1000;

/** The family's own keys (CoMLRL MAGRPOConfig names; "(magrpo)" marks our additions). */
export const MAGRPO_OPTIONS = {
  advantage_mode: z
    .enum(['mean', 'raw', 'max', 'rloo'])
    .default('mean')
    .describe('baseline: mean (MAGRPO), raw (MAREINFORCE), max (MAReMax), rloo (MARLOO); algorithm mareinforce, marloo, maremax fix it'),
  advantage_normalization: z
    .boolean()
    .default(true)
    .describe(
      'standardise advantages within each node sample (population std); (magrpo) mareinforce, marloo and maremax default to false; iac: within each turn group of a drained buffer',
    ),
  cross_credit: z
    .enum(['mean', 'sum'])
    .default('mean')
    .describe('(magrpo) cross mode: credit a completion with the mean (default) or the sum (reference) of its joint returns'),
  drop_uniform_groups: z
    .boolean()
    .default(false)
    .describe(
      "(magrpo; DAPO's dynamic-sampling filter) leave out of the buffers node samples whose G returns are all equal: their advantages are zero, so their optimizer steps would only carry the KL term. Their rewards are still logged. A decaying lr_scheduler plans for every group, so it ends before reaching its last value",
    ),
  uniform_item_skip_epochs: z
    .number()
    .int()
    .min(0)
    .default(0)
    .describe(
      '(magrpo) a training item whose every node sample had equal returns (always solved or never) sits out this many following epochs, then is tried again: sampling goes to items the team sometimes solves (0 = off)',
    ),
  loss_aggregation: z
    .enum(['sequence_sum', 'token_mean', 'constant_norm'])
    .default('sequence_sum')
    .describe('(magrpo) per-sequence log-prob: sum (MAGRPO), mean over tokens, or sum / max_new_tokens (Dr. GRPO)'),
  ppo_clip_eps: z.number().positive().nullable().default(null).describe('(magrpo) PPO ratio clipping ε (null = plain policy gradient)'),
  ppo_epochs: z.number().int().min(1).max(MAX_PPO_EPOCHS).default(1).describe('(magrpo) passes over each drained buffer (> 1 re-uses rollouts)'),
  reference_kl_enabled: z.boolean().default(false).describe('penalise divergence from a frozen copy of the initial policy'),
  reference_kl_coef: z
    .union([z.number().min(0), z.array(z.number().min(0)).min(1)])
    .default(0.1)
    .describe('β of the reference KL, one for all agents or one per agent (a writer that drifts can be held closer than one that must move)'),
  reference_kl_mode: z
    .enum(['reward_shaping', 'loss'])
    .default('reward_shaping')
    .describe('(magrpo) KL as return shaping R − β·KL (reference) or as a loss term β·KL with gradient'),
};

type MagrpoOptions = z.output<z.ZodObject<typeof MAGRPO_OPTIONS>>;

/** Weight of one token of a sequence of `length` tokens in its sequence's log-prob aggregate. */
export function tokenCoefficient(aggregation: LossSettings['lossAggregation'], length: number, maxNewTokens: number): number {
  return aggregation === 'sequence_sum' ? 1 : aggregation === 'token_mean' ? 1 / length : 1 / maxNewTokens;
}

/**
 * Agent i's loss sample at a node: returns_i (aligned R, cross credit), KL shaping, advantages
 * (docs/algorithms.md "The update, equation by equation").
 */
export function policyGradientSample(node: ScoredNode, agent: number, c: MagrpoOptions): LossSample {
  const group = node.groups[agent];
  const R = agentReturns(node.returns, node.joint, agent, group.completions.length, c.cross_credit);
  const shaped =
    c.reference_kl_enabled && c.reference_kl_mode === 'reward_shaping' ? shapeWithKl(R, group.refKl ?? null, perAgent(c.reference_kl_coef, agent)) : R;
  return {
    promptIds: group.promptIds,
    completions: group.completions.map((x) => x.ids),
    advantages: advantages(shaped, c.advantage_mode, c.advantage_normalization),
    oldLogprobs: group.completions.map((x) => x.logprobs),
    refLogprobs: group.refLogprobs,
    ...(group.completions.some((x) => x.samplerLogprobs) ? { samplerLogprobs: group.completions.map((x) => x.samplerLogprobs ?? []) } : {}),
  };
}

/**
 * −Σ_g A_g · Σ_t c_t log π(y_g,t) / #scored (per-token weights w_t of remote rollouts), or with
 * PPO −Σ c_t · w_t · min(ρ_t A, clip(ρ_t, 1 ± ε) A), ρ_t = exp(log π − log π_old); plus β · Σ c_t · k3_t
 * with the KL loss term. Everything × `weight` (the sample's share of its minibatch).
 */
export function policyGradientLoss(lp: ScoredTokens, s: LossSample, settings: LossSettings, weight: number): LossTerms {
  const R = lp.sequenceOf.length;
  // c[t]: weight of token t in its sequence's aggregate, already divided by #scored sequences.
  const c = new Float64Array(R);
  const A = new Float64Array(R);
  const w = new Float64Array(R).fill(1);
  const oldFlat = new Float64Array(R);
  const refFlat = new Float64Array(R);
  const pos = new Array<number>(s.completions.length).fill(0);
  for (let t = 0; t < R; t++) {
    const g = lp.sequenceOf[t];
    const k = pos[g]++;
    c[t] = (tokenCoefficient(settings.lossAggregation, lp.lengths[g], settings.maxNewTokens) / lp.scored) * weight;
    A[t] = s.advantages[g];
    oldFlat[t] = s.oldLogprobs[g]?.[k] ?? 0;
    refFlat[t] = s.refLogprobs?.[g]?.[k] ?? 0;
    w[t] = s.tokenWeights?.[g]?.[k] ?? 1;
  }
  let loss: Tensor;
  let clipped = 0;
  if (settings.ppoClipEps === null) {
    loss = weightedSum(
      lp.tokenLogprobs,
      c.map((ct, t) => -ct * A[t] * w[t]),
    );
  } else {
    const eps = settings.ppoClipEps;
    const ratio = exp(sub(lp.tokenLogprobs, tensor(oldFlat)));
    const At = tensor(A);
    loss = weightedSum(
      minimum(mul(ratio, At), mul(clamp(ratio, 1 - eps, 1 + eps), At)),
      c.map((ct, t) => -ct * w[t]),
    );
    for (let t = 0; t < R; t++) if ((ratio.data[t] < 1 - eps && A[t] < 0) || (ratio.data[t] > 1 + eps && A[t] > 0)) clipped++;
  }
  let klSum = 0;
  let klTokens = 0;
  if (s.refLogprobs) {
    klSum = klK3(lp.tokenLogprobs.data, refFlat);
    klTokens = R;
  }
  if (settings.referenceKl?.mode === 'loss' && s.refLogprobs) {
    // β · Σ_t c_t · k3_t, k3 = exp(ref − logπ) − (ref − logπ) − 1, gradient through logπ only
    const d = sub(tensor(refFlat), lp.tokenLogprobs);
    const sumC = c.reduce((x, y) => x + y, 0);
    const kl = add(weightedSum(sub(exp(d), d), c), tensor([-sumC]));
    loss = add(loss, scale(kl, settings.referenceKl.coef));
  }
  return { loss, clipped, klSum, klTokens };
}

/** One family member: the same update with its baseline fixed (MAGRPO: any baseline, `mean` by default). */
function member(name: string, mode: MagrpoOptions['advantage_mode'] | null): Algorithm<MagrpoOptions> {
  return {
    name,
    options: MAGRPO_OPTIONS,
    // Normalisation off by default: z-scoring cancels any per-node baseline (docs/differences.md).
    defaults: () => (mode === null ? {} : { advantage_mode: mode, advantage_normalization: false }),
    schedule: 'online',
    check: (c) =>
      mode === null || c.advantage_mode === mode
        ? []
        : [
            {
              path: ['advantage_mode'],
              message: `algorithm ${name} is advantage_mode ${mode}, got ${c.advantage_mode}; for another baseline use algorithm magrpo`,
            },
          ],
    samples: (node, c) => node.groups.map((_, i) => [policyGradientSample(node, i, c)]),
    loss: policyGradientLoss,
  };
}

export const MAGRPO = member('magrpo', null);
export const MAREINFORCE = member('mareinforce', 'raw');
export const MARLOO = member('marloo', 'rloo');
export const MAREMAX = member('maremax', 'max');
