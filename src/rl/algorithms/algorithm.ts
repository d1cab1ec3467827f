/**
 * What an algorithm is (docs/algorithms.md lists them; CONTRIBUTING.md "Add an algorithm"):
 *
 *   options   its own config keys, zod fields merged flat into the trainer section, TRL style
 *   defaults  the values it gives shared keys unless the config sets them (MAREINFORCE: no baseline)
 *   check     what it refuses in a resolved config, by key (MADPO: num_turns > 1)
 *   team      the task its agents play (centralized MAGRPO: one joint policy for every role)
 *   schedule  what it needs from rollouts: online (train as each item's tree is scored) or
 *             offline (score every item first, then epochs over what they gave)
 *   samples   per agent, the loss samples of one scored tree node
 *   teamBatch what a step needs from the whole team (MADPO: the other agents' log-ratios)
 *   loss      one sample's loss for one agent on the learner's log-probs (rl/learner.ts)
 *   critic    whether each agent carries a value head the loss reads (IAC), and its loss settings
 *   prepareBatch  online: what a drain does to a turn group's samples before its minibatches
 *             (IAC: advantages z-scored over the group)
 *
 * What it saves follows from its schedule: online algorithms checkpoint their pending buffers,
 * offline ones the samples of every item (rl/trainer.ts). Modules here import only the engine,
 * rl/advantage.ts, rl/task.ts and this folder, so the learner (below the trainer) can call their
 * losses.
 */
import type { z } from 'zod';
import type { Rng } from '../../engine/rng.js';
import type { Tensor } from '../../engine/tensor.js';
import type { Task } from '../task.js';

/** One node sample ready for the loss: a prompt's completions and what the algorithm's loss reads. */
export interface LossSample {
  promptIds: number[];
  completions: number[][];
  /** Policy gradient: one advantage per completion (a preference pair's are unused: []). */
  advantages: number[];
  /** Sampling-time log-probs per token (π_old), for PPO ratios. */
  oldLogprobs: number[][];
  refLogprobs?: number[][];
  /** Remote sampler's log-probs per token (empty: unknown), for truncated importance sampling. */
  samplerLogprobs?: number[][];
  /**
   * Per completion, per token: a factor on that token's policy-gradient term (truncated
   * importance-sampling weights of remote rollouts); absent = 1. The KL term is not weighted.
   */
  tokenWeights?: number[][];
  /** A preference pair (MADPO): completions are [winner, loser]; its loss is DPO's (algorithms/madpo.ts). */
  preference?: PreferenceTerms;
  /** Actor-critic (IAC): per completion, the value at sampling time and the value target. */
  critic?: CriticTerms;
}

/** What a value loss needs besides the value the learner computes now. */
export interface CriticTerms {
  /** V_old per completion: the value head's output when the completion was sampled. */
  oldValues: number[];
  /** Per completion: the target the value regresses to (IAC: r, or r + γ·V_old(next turn)). */
  targets: number[];
  /** Per completion: the ids a critic model reads, when not the agent's own (MAAC: the joint prompt, or joint prompt + joint action). */
  inputs?: number[][];
}

/** How an agent's value head is read and trained (present: the agent has one; model/value-head.ts). */
export interface CriticSettings {
  /** v: V(h), the head at the prompt's last token; q: Q(h, a), at the completion's last token. */
  type: 'v' | 'q';
  /** ε of PPO-style value clipping around V_old (null = plain squared error). */
  valueClipRange: number | null;
  /** Factor on the value loss in the agent's total loss. */
  valueLossCoef: number;
}

/** A critic model apart from the actors (rl/critics.ts): IAC's separate critic per agent, MAAC's one shared. */
export interface CriticModelSettings extends CriticSettings {
  /** true: one critic for the team over joint inputs (MAAC); false: one per agent over its own prompt. */
  shared: boolean;
  /** Its AdamW learning rate (null: agent_learning_rate, agent 0's for a shared critic). */
  lr: number | null;
}

/** What a preference pair's loss needs besides the agent's own log-probs. */
export interface PreferenceTerms {
  /** β of DPO. */
  beta: number;
  /** Σ_j≠i of the other agents' log π_j(y_w) − log π_j(y_l), current weights, no gradient (the trainer fills it per update). */
  otherDelta: number;
  /** Σ_j of log π_ref,j(y_w) − log π_ref,j(y_l) over every agent (0 when reference-free). */
  refDelta: number;
}

/** Per-run loss settings of one agent's learner (rl/learner.ts LearnerSpec extends them). */
export interface LossSettings {
  index: number;
  /** The run's algorithm (its loss is used); absent: magrpo. */
  algorithm?: string;
  lossAggregation: 'sequence_sum' | 'token_mean' | 'constant_norm';
  maxNewTokens: number;
  ppoClipEps: number | null;
  referenceKl: { mode: 'reward_shaping' | 'loss'; coef: number } | null;
  /** The agent's value head (actor-critic algorithms); absent or null: none. */
  critic?: CriticSettings | null;
}

/** One sample's completions scored by the learner's forward pass (model/logprobs.ts). */
export interface ScoredTokens {
  /** [R] log π of every completion token, completions concatenated in order; differentiable. */
  tokenLogprobs: Tensor;
  /** [R] the sample's completion each token belongs to. */
  sequenceOf: Int32Array;
  /** Tokens of each completion of the sample (0: empty, nothing scored). */
  lengths: number[];
  /** Completions with at least one token. */
  scored: number;
  /** With a critic: per completion of the sample, its value [1] under the current weights; differentiable. */
  values?: Tensor[];
}

/** One sample's loss: the graph to differentiate (already × its weight) and what is logged of it. */
export interface LossTerms {
  loss: Tensor;
  /** Fraction numerator: tokens whose PPO term was clipped. */
  clipped: number;
  /** Σ of per-token k3 KL against the reference, over `klTokens` tokens (0, 0 without one). */
  klSum: number;
  klTokens: number;
  /** Actor-critic: the sample's value error, mean over its completions (before value_loss_coef and `weight`). */
  valueLoss?: number;
}

/** A problem with a config key, reported as `key: message` (rl/config.ts ConfigIssue). */
export interface KeyProblem {
  path: string[];
  message: string;
}

/** The shared trainer keys algorithms read (declared in rl/config.ts; its MagrpoConfig has them all). */
export interface SharedConfig {
  algorithm: string;
  num_agents: number;
  num_generations: number;
  num_turns: number;
  discount: number;
  joint_mode: 'aligned' | 'cross';
  lr_scheduler: 'constant' | 'linear' | 'cosine';
  learner: { backend: 'local' | 'torch' };
}

/** A tree node after scoring, as algorithms read it (rl/rollout.ts TreeNode is one). */
export interface ScoredNode {
  turn: number;
  /** Per agent: the prompt's ids and its G completions with their sampling-time log-probs. */
  groups: readonly {
    promptIds: number[];
    completions: readonly { ids: number[]; logprobs: number[]; samplerLogprobs?: number[] }[];
    refLogprobs?: number[][];
    refKl?: number[];
    /** With a critic: per completion, the value head's output at sampling time (V_old). */
    values?: number[];
  }[];
  /** A shared critic (MAAC): per joint action, the ids it reads and its value at sampling time. */
  jointCritic?: { inputs: number[][]; values: number[] };
  /** Joint actions as per-agent completion indices, with their rewards and returns. */
  joint: readonly (readonly number[])[];
  rewards: readonly number[];
  returns: readonly number[];
  /** The next turn's node per joint action (null: a leaf, or the episode terminated early). */
  children?: readonly (ScoredNode | null)[];
}

/** The task an algorithm's agents play, and their outputs as the user's task has them (one per role). */
export interface TeamTask<Item> {
  task: Task<Item>;
  roleOutputs(completions: readonly string[], item: Item): string[];
}

export interface Algorithm<Own = object> {
  /** The value of `trainer.algorithm`. */
  readonly name: string;
  /** Its own keys (TRL-style documented zod fields), flat in the trainer section; set under another algorithm they are an error. */
  readonly options: z.ZodRawShape;
  /** Values it gives keys the trainer section leaves unset (read before validation; MARLOO: advantage_mode rloo). */
  defaults?(section: Readonly<Record<string, unknown>>): Record<string, unknown>;
  readonly schedule: 'online' | 'offline';
  /** What it refuses in a resolved config, by key. */
  check(c: SharedConfig & Own): KeyProblem[];
  /** Per agent, the loss samples of one scored node (`rng` for random choices, e.g. pair selection). */
  samples(node: ScoredNode, c: SharedConfig & Own, rng: Rng): LossSample[][];
  /** The task its agents play when it is not the user's (centralized MAGRPO: one joint policy for every role). */
  team?<Item>(task: Task<Item>, c: SharedConfig & Own): TeamTask<Item>;
  /** Offline: the most samples one item gives (sizes the LR schedule). */
  samplesPerItem?(c: SharedConfig & Own): number;
  /** Online: the loss samples one node gives each agent (sizes the LR schedule; absent: 1). */
  samplesPerNode?(c: SharedConfig & Own): number;
  /** Its agents' value heads (absent or null: none); defined by actor-critic algorithms even when it gives null. */
  critic?(c: SharedConfig & Own): CriticSettings | null;
  /** Critic models apart from the actors, trained on the actors' minibatches (absent or null: none). */
  criticModel?(c: SharedConfig & Own): CriticModelSettings | null;
  /**
   * Online: one turn group of a drained buffer (one agent's samples of one turn), before it is
   * shuffled into minibatches; absent: as they are.
   */
  prepareBatch?(samples: readonly LossSample[], c: SharedConfig & Own): LossSample[];
  /**
   * Offline: the minibatch each agent steps on, from every agent's minibatch (same items, same
   * order) and the log-probs Σ_t log π of their completions under the team's current weights;
   * with metrics of the batch. Absent: each agent steps on its own samples as they are.
   */
  teamBatch?(batch: readonly (readonly LossSample[])[], logprobs: readonly number[][][]): { samples: LossSample[][]; metrics: Record<string, number> };
  /** One sample's loss on the agent's log-probs of its scored completions, × `weight`. */
  loss(lp: ScoredTokens, s: LossSample, settings: LossSettings, weight: number): LossTerms;
}
