/**
 * A joint reward model for MARLHF (CoMLRL `JointRewardModel`, comlrl/trainers/preference/marlhf.py;
 * Ouyang et al., *Training language models to follow instructions with human feedback*, arXiv
 * 2203.02155): a causal LM whose final hidden state (after the final norm) at the last token of a
 * joint text is read by a scalar head, r = w · h_T + b, w [1, C], b [1].
 *
 * The joint text of prompts p_1..p_N and responses y_1..y_N is the reference's:
 *
 *   "Joint multi-agent response\n\nAgent 1 prompt:\n{p_1}\n\nAgent 1 response:\n{y_1}\n\n…"
 *
 * Trained on preference pairs (chosen joint action w, rejected l) with the Bradley–Terry loss,
 * mean over a batch B:  L = (1/|B|) Σ −log σ(r_w − r_l) = (1/|B|) Σ softplus(r_l − r_w),
 * one AdamW step (torch defaults: β (0.9, 0.999), ε 1e-8, weight decay 0.01) per batch of
 * `train_batch_size` pairs, `num_train_epochs` passes over the pairs shuffled per pass.
 *
 * Saved as a model folder (config.json, weights, tokenizer) plus `reward_head.safetensors`
 * (`reward_head.weight` [1, C], `reward_head.bias` [1], F32: the reference module's state-dict
 * names) and `reward_model.json` (agents, max_length, how it was trained).
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { add, exp, linear, log, reshape, scale, sub } from '../engine/ops.js';
import { AdamW, gradNorm } from '../engine/optim.js';
import { Rng } from '../engine/rng.js';
import { allocPersistent } from '../engine/runtime.js';
import { backward, noGrad, Tensor, tensor } from '../engine/tensor.js';
import { LanguageModel } from '../model/pretrained.js';
import { readSafetensors, writeSafetensors } from '../model/safetensors.js';
import { type Task, TaskError } from './task.js';

export const REWARD_HEAD_FILE = 'reward_head.safetensors';
export const REWARD_HEAD_WEIGHT = 'reward_head.weight';
export const REWARD_HEAD_BIAS = 'reward_head.bias';
export const REWARD_MODEL_META = 'reward_model.json';

/** One preference: the chosen joint action's responses beat the rejected one's, for the same prompts. */
export interface PreferencePair {
  /** One prompt per agent, as text. */
  prompts: string[];
  chosen: string[];
  rejected: string[];
}

/** How a reward model is trained (CoMLRL MARLHFConfig `reward_*` names without the prefix). */
export interface RewardTrainingOptions {
  /** reward_learning_rate: AdamW learning rate (default 1e-5). */
  learning_rate: number;
  /** reward_num_train_epochs: passes over the pairs (default 1). */
  num_train_epochs: number;
  /** reward_train_batch_size: pairs per optimizer step (default 1). */
  train_batch_size: number;
  /** reward_max_length: tokens of a joint text kept (null = all). */
  max_length: number | null;
  /** reward_freeze_backbone: train only the head (default false). */
  freeze_backbone: boolean;
  /** Seeds the head's initialisation and the shuffles. */
  seed: number;
}

export const REWARD_TRAINING_DEFAULTS: RewardTrainingOptions = {
  learning_rate: 1e-5,
  num_train_epochs: 1,
  train_batch_size: 1,
  max_length: null,
  freeze_backbone: false,
  seed: 0,
};

/** The reference's joint text (CoMLRL `_format_joint_text`); agents without a prompt or response get "". */
export function jointText(prompts: readonly string[], responses: readonly string[], numAgents: number): string {
  const parts = ['Joint multi-agent response'];
  for (let i = 0; i < numAgents; i++) {
    parts.push(`Agent ${i + 1} prompt:\n${prompts[i] ?? ''}`);
    parts.push(`Agent ${i + 1} response:\n${responses[i] ?? ''}`);
  }
  return parts.join('\n\n');
}

/** What `reward_model.json` holds. */
export interface RewardModelMeta {
  format: 'magrpo-reward-model';
  num_agents: number;
  max_length: number | null;
  training?: RewardTrainingOptions & { pairs: number; base_model: string };
}

export class RewardModel {
  constructor(
    readonly lm: LanguageModel,
    /** [1, C] */
    readonly weight: Tensor,
    /** [1] */
    readonly bias: Tensor,
    readonly numAgents: number,
    readonly maxLength: number | null,
  ) {}

  /**
   * A fresh head on the model folder `base`: w and b ~ U(−1/√C, 1/√C), nn.Linear's default
   * initialisation, which the reference uses.
   */
  static create(base: string, numAgents: number, o: Pick<RewardTrainingOptions, 'max_length' | 'freeze_backbone' | 'seed'>): RewardModel {
    const lm = LanguageModel.load(base);
    const C = lm.model.config.hiddenSize;
    const rng = new Rng(o.seed);
    const bound = 1 / Math.sqrt(C);
    const weight = new Tensor(allocPersistent(C), [1, C], true, REWARD_HEAD_WEIGHT);
    const bias = new Tensor(allocPersistent(1), [1], true, REWARD_HEAD_BIAS);
    for (let i = 0; i < C; i++) weight.data[i] = (rng.next() * 2 - 1) * bound;
    bias.data[0] = (rng.next() * 2 - 1) * bound;
    for (const p of lm.model.params.values()) p.requiresGrad = !o.freeze_backbone;
    return new RewardModel(lm, weight, bias, numAgents, o.max_length);
  }

  /** A saved reward model; a folder without its head or metadata is an error naming the file. */
  static load(dir: string): RewardModel {
    if (!existsSync(dir)) throw new Error(`reward model ${dir}: no such folder; train one with \`magrpo reward-model\``);
    const headFile = join(dir, REWARD_HEAD_FILE);
    if (!existsSync(headFile))
      throw new Error(
        `reward model ${dir}: no ${REWARD_HEAD_FILE} (its scalar head); a plain model folder is not a reward model, train one with \`magrpo reward-model\``,
      );
    const metaFile = join(dir, REWARD_MODEL_META);
    if (!existsSync(metaFile))
      throw new Error(`reward model ${dir}: no ${REWARD_MODEL_META} (its number of agents and max_length); \`magrpo reward-model\` writes it`);
    let meta: RewardModelMeta;
    try {
      meta = JSON.parse(readFileSync(metaFile, 'utf8'));
    } catch (e) {
      throw new Error(`${metaFile}: not JSON (${(e as Error).message})`);
    }
    if (meta?.format !== 'magrpo-reward-model' || !Number.isInteger(meta.num_agents) || meta.num_agents < 1)
      throw new Error(`${metaFile}: needs "format": "magrpo-reward-model" and "num_agents" ≥ 1`);
    if (meta.max_length !== null && !(Number.isInteger(meta.max_length) && meta.max_length > 0))
      throw new Error(`${metaFile}: "max_length" must be a positive integer or null`);
    const lm = LanguageModel.load(dir);
    const C = lm.model.config.hiddenSize;
    const t = readSafetensors(headFile);
    const w = t.get(REWARD_HEAD_WEIGHT);
    const b = t.get(REWARD_HEAD_BIAS);
    if (!w || !b) throw new Error(`${headFile}: needs ${REWARD_HEAD_WEIGHT} and ${REWARD_HEAD_BIAS}`);
    if (w.data.length !== C || b.data.length !== 1) throw new Error(`${headFile}: a head of width ${w.data.length}, the model's hidden size is ${C}`);
    const weight = new Tensor(allocPersistent(C), [1, C], true, REWARD_HEAD_WEIGHT);
    const bias = new Tensor(allocPersistent(1), [1], true, REWARD_HEAD_BIAS);
    weight.data.set(w.data);
    bias.data.set(b.data);
    for (const p of lm.model.params.values()) p.requiresGrad = false;
    return new RewardModel(lm, weight, bias, meta.num_agents, meta.max_length);
  }

  /** Writes the folder `load` reads (`training`: recorded in reward_model.json). */
  save(dir: string, training?: RewardModelMeta['training']): void {
    this.lm.save(dir);
    writeSafetensors(join(dir, REWARD_HEAD_FILE), {
      [REWARD_HEAD_WEIGHT]: { dtype: 'F32', shape: [1, this.weight.size], data: Float32Array.from(this.weight.data) },
      [REWARD_HEAD_BIAS]: { dtype: 'F32', shape: [1], data: Float32Array.from(this.bias.data) },
    });
    const meta: RewardModelMeta = { format: 'magrpo-reward-model', num_agents: this.numAgents, max_length: this.maxLength, ...(training ? { training } : {}) };
    writeFileSync(join(dir, REWARD_MODEL_META), `${JSON.stringify(meta, null, 2)}\n`);
  }

  /** Trainable tensors: the head, and the backbone's weights unless frozen. */
  params(): Tensor[] {
    return [...this.lm.model.trainableParams(), this.weight, this.bias];
  }

  /**
   * Token ids of a joint text, with the tokenizer's special tokens. Past max_length the start is
   * cut (BOS kept): the score is read at the last token and the responses come last, so the
   * reference's right truncation would cut the very responses being judged (docs/differences.md).
   */
  ids(prompts: readonly string[], responses: readonly string[]): number[] {
    const ids = this.lm.tokenizer.encode(jointText(prompts, responses, this.numAgents));
    const cap = Math.min(this.maxLength ?? Number.POSITIVE_INFINITY, this.lm.model.maxPositions);
    if (ids.length <= cap) return ids;
    const bos = this.lm.tokenizer.bosId !== null && ids[0] === this.lm.tokenizer.bosId ? [ids[0]] : [];
    return [...bos, ...ids.slice(ids.length - (cap - bos.length))];
  }

  /** [1] the reward of a token sequence, differentiable through the head and the trainable weights. */
  scoreIds(ids: readonly number[]): Tensor {
    if (ids.length === 0) throw new Error('reward model: an empty joint text has no last token');
    const h = this.lm.model.forward(Int32Array.from(ids), 1, ids.length, { outputRows: Int32Array.of(ids.length - 1), output: 'hidden' }); // [1, C]
    return reshape(linear(h, this.weight, this.bias), [1]);
  }

  /** The reward of one joint action (no gradient). */
  score(prompts: readonly string[], responses: readonly string[]): number {
    return noGrad(() => this.scoreIds(this.ids(prompts, responses)).data[0]);
  }
}

/** softplus(u) = log(1 + e^u), written stably on either side of 0. */
function softplus(u: Tensor): Tensor {
  const one = tensor([1]);
  return u.data[0] > 0 ? add(u, log(add(exp(scale(u, -1)), one))) : log(add(exp(u), one));
}

/** One pair's Bradley–Terry loss −log σ(r_w − r_l) = softplus(r_l − r_w), × weight; with both rewards. */
export function bradleyTerryLoss(
  rm: RewardModel,
  chosen: readonly number[],
  rejected: readonly number[],
  weight: number,
): { loss: Tensor; chosen: number; rejected: number } {
  const rw = rm.scoreIds(chosen);
  const rl = rm.scoreIds(rejected);
  return { loss: scale(softplus(sub(rl, rw)), weight), chosen: rw.data[0], rejected: rl.data[0] };
}

/** What one optimizer step of reward-model training logs. */
export interface RewardStepLog {
  step: number;
  epoch: number;
  /** Mean Bradley–Terry loss of the batch (before the step). */
  loss: number;
  /** Share of the batch's pairs with r_w > r_l. */
  accuracy: number;
  /** Mean r_w − r_l. */
  margin: number;
  /** Global gradient norm of the step. */
  gradNorm: number;
  /** The batch: indices into the pairs, in the order their gradients were accumulated. */
  pairs: number[];
}

/**
 * Tokenised pairs, once: each pair's chosen and rejected joint texts as ids.
 */
export function encodePairs(rm: RewardModel, pairs: readonly PreferencePair[]): { chosen: number[]; rejected: number[] }[] {
  return pairs.map((p) => ({ chosen: rm.ids(p.prompts, p.chosen), rejected: rm.ids(p.prompts, p.rejected) }));
}

/**
 * Trains `rm` on `pairs` (the module header's loss and schedule). Each batch's gradient is the
 * mean over its pairs, accumulated pair by pair (one pair's graph alive at a time).
 */
export function trainRewardModel(
  rm: RewardModel,
  pairs: readonly PreferencePair[],
  o: RewardTrainingOptions,
  hooks: { onStep?: (log: RewardStepLog) => void; beforeStep?: () => void } = {},
): { steps: number; logs: RewardStepLog[] } {
  if (pairs.length === 0) throw new Error('reward model: no preference pairs to train on');
  const encoded = encodePairs(rm, pairs);
  const opt = new AdamW(rm.params(), { lr: o.learning_rate, weightDecay: 0.01 });
  const rng = new Rng(o.seed + 1);
  const logs: RewardStepLog[] = [];
  let step = 0;
  for (let epoch = 0; epoch < o.num_train_epochs; epoch++) {
    const order = rng.shuffle(encoded.map((_, k) => k));
    for (let k = 0; k < order.length; k += o.train_batch_size) {
      const batch = order.slice(k, k + o.train_batch_size);
      let loss = 0;
      let right = 0;
      let margin = 0;
      for (const b of batch) {
        const r = bradleyTerryLoss(rm, encoded[b].chosen, encoded[b].rejected, 1 / batch.length);
        loss += r.loss.data[0];
        right += r.chosen > r.rejected ? 1 : 0;
        margin += (r.chosen - r.rejected) / batch.length;
        backward(r.loss);
      }
      const norm = gradNorm(opt.params);
      if (!Number.isFinite(norm)) throw new Error(`reward model: gradient norm is ${norm} at step ${step + 1}; lower learning_rate`);
      hooks.beforeStep?.();
      opt.step();
      opt.zeroGrad();
      const entry = { step: ++step, epoch, loss, accuracy: right / batch.length, margin, gradNorm: norm, pairs: batch };
      logs.push(entry);
      hooks.onStep?.(entry);
    }
  }
  for (const p of rm.params()) p.requiresGrad = false;
  return { steps: step, logs };
}

/**
 * The task with its joint reward replaced by the reward model's score of each joint action (the
 * prompts as the agents saw them, their completions), as MARLHF trains on it. The task's own
 * reward processor is dropped: it shapes the task's reward, not the model's; the config's
 * reward_processor still applies.
 */
export function rewardModelTask<Item>(task: Task<Item>, rm: RewardModel, numAgents: number): Task<Item> {
  if (rm.numAgents !== numAgents)
    throw new TaskError(
      'reward_model',
      `the reward model scores joint actions of ${rm.numAgents} agents, this run has ${numAgents}; train one on this team's pairs`,
    );
  const { rewardProcessor: _dropped, ...rest } = task;
  return { ...rest, reward: (input) => rm.score(input.prompts, input.completions) };
}
