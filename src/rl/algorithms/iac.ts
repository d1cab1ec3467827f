/**
 * IAC, independent actor-critic (CoMLRL comlrl/trainers/actor_critic/iac.py, formerly IPPO;
 * actor-critic: Konda & Tsitsiklis, NeurIPS 1999; independent learners in LLM teams: MAGRPO's
 * paper, arXiv 2508.04652). Each agent i is an actor π_i with a value head V_i on its own
 * model (model/value-head.ts), trained on its own samples. Per completion y of prompt h (one loss
 * sample each), with r the joint reward of the joint action it is part of:
 *
 *   V_old    the head's value when y was sampled: V(h) at h's last token (critic_type v),
 *            or Q(h, y) at y's last token (q)
 *   target   r + γ · V_old(h') with h' the same agent's next-turn prompt of the trajectory,
 *            r at the last turn (or where the episode terminated)              TD(0)
 *   A        target − V_old, z-scored over the turn group of a drained buffer (advantage_normalization)
 *   L_i      mean_batch [ −A · Σ_t log π_i(y_t | h, y_<t) ]
 *            + value_loss_coef · mean_batch max((target − V)², (target − V_clip)²),
 *            V_clip = V_old + clip(V − V_old, ±value_clip_range)   (plain (target − V)² when null)
 *
 * one AdamW step per minibatch over the actor's trainable weights and the head. With
 * use_separate_critic the critic is a model of its own (rl/critics.ts) with its own AdamW at
 * critic_learning_rate: the actor's loss is the policy term alone, the critic's the value term.
 * With reference_kl_enabled, r is shaped per agent as r − β·KL_i(y) (reward_shaping, the
 * reference's) or β·Σ_t k3_t joins the policy term (loss). Multi-turn needs num_generations 1, as
 * the reference: the TD target reads the one next-turn node.
 */
import { z } from 'zod';
import { add, clamp, exp, scale, square, sub, weightedSum } from '../../engine/ops.js';
import { type Tensor, tensor } from '../../engine/tensor.js';
import { klK3, perAgent } from '../advantage.js';
import type { Algorithm, KeyProblem, LossSample, LossSettings, LossTerms, ScoredNode, ScoredTokens } from './algorithm.js';
import { MAGRPO_OPTIONS } from './magrpo.js';

/** IAC's own keys (CoMLRL IACConfig names). */
export const IAC_OPTIONS = {
  use_separate_critic: z
    .boolean()
    .default(false)
    .describe(
      "iac: a separate critic model per agent, a copy of its starting model with a value head and its own AdamW at critic_learning_rate (true, the reference's default; twice the models in memory), or a value head on each actor (false)",
    ),
  critic_type: z
    .enum(['v', 'q', 'V', 'Q'])
    .default('v')
    .transform((t): 'v' | 'q' => (t === 'V' || t === 'v' ? 'v' : 'q'))
    .describe(
      'iac: v = V(h), the value of the prompt (its last token); q = Q(h, a), the value of prompt + completion (its last token); V and Q read as v and q',
    ),
  value_clip_range: z
    .number()
    .positive()
    .nullable()
    .default(0.2)
    .describe('iac: ε of the clipped value loss max((t − V)², (t − V_old − clip(V − V_old, ±ε))²); null = (t − V)²'),
  value_loss_coef: z.number().min(0).default(0.6).describe("iac: factor on the value loss in each agent's loss"),
  critic_learning_rate: z
    .number()
    .positive()
    .nullable()
    .default(null)
    .describe(
      "iac, maac: learning rate of the critic model (iac's separate critic, maac's shared one; null = agent_learning_rate, agent 0's for maac); iac's value head trains with its actor at agent_learning_rate",
    ),
};

/** The reference-model KL keys, shared with the MAGRPO family (CoMLRL's names; β 0.1). */
export const REFERENCE_KL_OPTIONS = {
  reference_kl_enabled: MAGRPO_OPTIONS.reference_kl_enabled,
  reference_kl_coef: MAGRPO_OPTIONS.reference_kl_coef,
  reference_kl_mode: MAGRPO_OPTIONS.reference_kl_mode,
};

/** What actor-critic samples read of the config. */
export interface ActorCriticConfig {
  discount: number;
  reference_kl_enabled: boolean;
  reference_kl_coef: number | number[];
  reference_kl_mode: 'reward_shaping' | 'loss';
}

type IacOptions = z.output<z.ZodObject<typeof IAC_OPTIONS>> & { advantage_normalization: boolean } & ActorCriticConfig;

/** Mean of agent `agent`'s rewards over the joint actions in which it played completion `g`. */
function completionReward(node: ScoredNode, agent: number, g: number): number {
  let s = 0;
  let n = 0;
  for (const [k, idx] of node.joint.entries()) {
    if (idx[agent] === g) {
      s += node.rewards[k];
      n++;
    }
  }
  return n ? s / n : 0;
}

/** The V_old of agent `agent` at the node that follows completion `g` (null: none follows). */
function nextValue(node: ScoredNode, agent: number, g: number): number | null {
  const k = node.joint.findIndex((idx) => idx[agent] === g);
  const child = k < 0 ? null : (node.children?.[k] ?? null);
  const v = child?.groups[agent].values?.[0];
  if (child && v === undefined) throw new Error(`iac: agent ${agent} has no sampling-time value at turn ${child.turn + 1}`);
  return child ? (v as number) : null;
}

/**
 * Agent i's loss samples at a node: one per completion, its raw advantage target − V_old, the
 * reward KL-shaped per agent (r − β·KL_i, KL the k3 sum over the completion's tokens) with
 * reference_kl_mode reward_shaping.
 */
export function actorCriticSamples(node: ScoredNode, agent: number, c: ActorCriticConfig): LossSample[] {
  const group = node.groups[agent];
  const shaping = c.reference_kl_enabled && c.reference_kl_mode === 'reward_shaping';
  return group.completions.map((x, g) => {
    const v = group.values?.[g];
    if (v === undefined) throw new Error(`agent ${agent} has no sampling-time value at turn ${node.turn + 1}`);
    const kl = group.refKl?.[g];
    if (shaping && kl === undefined) throw new Error(`agent ${agent} has no reference KL at turn ${node.turn + 1}`);
    const r = completionReward(node, agent, g) - (shaping ? perAgent(c.reference_kl_coef, agent) * (kl as number) : 0);
    const next = nextValue(node, agent, g);
    const target = r + (next === null ? 0 : c.discount * next);
    return {
      promptIds: group.promptIds,
      completions: [x.ids],
      advantages: [target - v],
      oldLogprobs: [x.logprobs],
      ...(group.refLogprobs ? { refLogprobs: [group.refLogprobs[g]] } : {}),
      ...(x.samplerLogprobs ? { samplerLogprobs: [x.samplerLogprobs] } : {}),
      critic: { oldValues: [v], targets: [target] },
    };
  });
}

/** Advantages z-scored over `samples` (population std, floored at 1e-6; CoMLRL `_prepare_advantages`); one sample is left as it is. */
export function normalizeAdvantages(samples: readonly LossSample[]): LossSample[] {
  const all = samples.flatMap((s) => s.advantages);
  if (all.length < 2) return [...samples];
  const m = all.reduce((a, b) => a + b, 0) / all.length;
  const std = Math.max(Math.sqrt(all.reduce((a, b) => a + (b - m) ** 2, 0) / all.length), 1e-6);
  return samples.map((s) => ({ ...s, advantages: s.advantages.map((a) => (a - m) / std) }));
}

/**
 * One sample's loss, × `weight`: per completion g (K of them, empty ones included),
 * (−A_g · Σ_t w_t log π(y_g,t) + β · Σ_t k3_t + coef · value error_g) / K, w_t the remote
 * rollouts' per-token weights, the k3 term with reference_kl_mode loss, the value term when the
 * agent carries a value head (a critic model apart from the actor trains in rl/critics.ts).
 */
export function actorCriticLoss(lp: ScoredTokens, s: LossSample, settings: LossSettings, weight: number): LossTerms {
  const critic = settings.critic ?? null;
  if (critic && (!s.critic || !lp.values)) throw new Error('actor-critic: a sample without its critic terms or values');
  const K = s.completions.length;
  const R = lp.sequenceOf.length;
  const pos = new Array<number>(K).fill(0);
  const c = new Float64Array(R);
  const kc = new Float64Array(R);
  const refFlat = new Float64Array(R);
  for (let t = 0; t < R; t++) {
    const g = lp.sequenceOf[t];
    const k = pos[g]++;
    c[t] = (-s.advantages[g] * (s.tokenWeights?.[g]?.[k] ?? 1) * weight) / K;
    kc[t] = weight / K;
    refFlat[t] = s.refLogprobs?.[g]?.[k] ?? 0;
  }
  let loss: Tensor = R > 0 ? weightedSum(lp.tokenLogprobs, c) : tensor([0]);
  let klSum = 0;
  let klTokens = 0;
  if (s.refLogprobs && R > 0) {
    klSum = klK3(lp.tokenLogprobs.data, refFlat);
    klTokens = R;
    if (settings.referenceKl?.mode === 'loss') {
      // β · Σ_t (exp(d) − d − 1) / K, d = log π_ref − log π: gradient through log π only
      const d = sub(tensor(refFlat), lp.tokenLogprobs);
      const kl = add(weightedSum(sub(exp(d), d), kc), tensor([-(weight / K) * R]));
      loss = add(loss, scale(kl, settings.referenceKl.coef));
    }
  }
  if (!critic || !s.critic || !lp.values) return { loss, clipped: 0, klSum, klTokens };
  let valueLoss = 0;
  for (let g = 0; g < K; g++) {
    const V = lp.values[g];
    const target = tensor([s.critic.targets[g]]);
    let err = square(sub(V, target));
    if (critic.valueClipRange !== null) {
      const eps = critic.valueClipRange;
      const old = tensor([s.critic.oldValues[g]]);
      const clipped = square(sub(add(old, clamp(sub(V, old), -eps, eps)), target));
      // max of the two: where they tie (V inside the clip range) both have the same gradient
      if (clipped.data[0] > err.data[0]) err = clipped;
    }
    valueLoss += err.data[0] / K;
    loss = add(loss, scale(err, (critic.valueLossCoef * weight) / K));
  }
  return { loss, clipped: 0, klSum, klTokens, valueLoss };
}

export const IAC: Algorithm<IacOptions> = {
  name: 'iac',
  options: { ...IAC_OPTIONS, advantage_normalization: MAGRPO_OPTIONS.advantage_normalization, ...REFERENCE_KL_OPTIONS },
  // The reference's IACConfig defaults where they differ from the shared keys' (MAGRPOConfig's).
  defaults: () => ({ num_generations: 1, rollout_buffer_size: 8, num_train_epochs: 40 }),
  schedule: 'online',
  check(c) {
    const out: KeyProblem[] = [];
    const no = (path: string[], message: string) => out.push({ path, message });
    if (!c.use_separate_critic && c.critic_learning_rate !== null)
      no(
        ['critic_learning_rate'],
        'the value head trains with its actor at agent_learning_rate; critic_learning_rate is for a separate critic (use_separate_critic true): leave it null',
      );
    if (c.num_turns > 1 && c.num_generations !== 1)
      no(
        ['num_generations'],
        `multi-turn iac samples one completion per agent and turn (the TD target reads the next turn's value): set num_generations 1, got ${c.num_generations}`,
      );
    if (c.joint_mode !== 'aligned' && c.num_generations > 1) no(['joint_mode'], 'iac rewards aligned joint actions: set joint_mode aligned');
    return out;
  },
  samples: (node, c) => node.groups.map((_, i) => actorCriticSamples(node, i, c)),
  samplesPerNode: (c) => c.num_generations,
  critic: (c) => (c.use_separate_critic ? null : { type: c.critic_type, valueClipRange: c.value_clip_range, valueLossCoef: c.value_loss_coef }),
  criticModel: (c) =>
    c.use_separate_critic
      ? { shared: false, type: c.critic_type, valueClipRange: c.value_clip_range, valueLossCoef: c.value_loss_coef, lr: c.critic_learning_rate }
      : null,
  prepareBatch: (samples, c) => (c.advantage_normalization ? normalizeAdvantages(samples) : [...samples]),
  loss: actorCriticLoss,
};
