/**
 * `magrpo reward-model`: the first stage of MARLHF (docs/algorithms.md). Preference pairs come from
 * a file, or are sampled from the config's team and labelled by its environment's joint reward
 * (CoMLRL MARLHFTrainer's preference rollout); a joint reward model is trained on them with the
 * Bradley–Terry loss (rl/reward-model.ts) and written to a folder that `trainer.reward_model`
 * names for the second stage, `magrpo train`.
 */
import { mkdirSync } from 'node:fs';
import { LanguageModel } from '../model/pretrained.js';
import { readPreferencePairs, samplePreferencePairs, writePreferencePairs } from '../rl/preference-data.js';
import {
  type PreferencePair,
  REWARD_TRAINING_DEFAULTS,
  RewardModel,
  type RewardStepLog,
  type RewardTrainingOptions,
  trainRewardModel,
} from '../rl/reward-model.js';
import { prepareRun } from './prepare.js';

export interface RewardModelRunOptions extends Partial<RewardTrainingOptions> {
  /** Where the model is written (default: the config's trainer.reward_model). */
  out?: string;
  /** A JSONL preference file (rl/preference-data.ts) instead of sampled pairs. */
  pairs?: string;
  /** Also write the pairs trained on to this file. */
  savePairs?: string;
  /** Backbone folder (default: the first agent's model). */
  base?: string;
  /** Sampled pairs: candidates per agent and item, pairs kept per item, how they are chosen (CoMLRL defaults 80, 16, reward_gap). */
  candidates?: number;
  pairsPerSample?: number | null;
  pairSelection?: 'reward_gap' | 'all' | 'random';
  set?: string[];
  log?: (line: string) => void;
}

export async function rewardModelRun(target: string, o: RewardModelRunOptions = {}): Promise<{ dir: string; pairs: number; logs: RewardStepLog[] }> {
  const log = o.log ?? ((l: string) => process.stderr.write(`${l}\n`));
  const { env, split, models, trainer } = await prepareRun(target, o.set ?? []);
  const dir = o.out ?? trainer.reward_model;
  if (!dir) throw new Error(`${target}: say where the reward model goes: --out <dir>, or trainer.reward_model in the config`);
  const train: RewardTrainingOptions = { ...REWARD_TRAINING_DEFAULTS, seed: trainer.seed };
  for (const k of Object.keys(REWARD_TRAINING_DEFAULTS) as (keyof RewardTrainingOptions)[]) if (o[k] !== undefined) Object.assign(train, { [k]: o[k] });
  let pairs: PreferencePair[];
  if (o.pairs) {
    pairs = readPreferencePairs(o.pairs);
    if (pairs[0].prompts.length !== models.length)
      throw new Error(`preference file ${o.pairs}: rows have ${pairs[0].prompts.length} agents, the config's team has ${models.length}`);
  } else {
    const selection = o.pairSelection ?? 'reward_gap';
    if (selection === 'all' && o.pairsPerSample !== undefined && o.pairsPerSample !== null)
      throw new Error('pair selection "all" keeps every pair: leave out --pairs-per-sample (or give null)');
    const sampling = {
      preference_num_candidates: o.candidates ?? 80,
      preference_pairs_per_sample: selection === 'all' ? null : o.pairsPerSample === undefined ? 16 : o.pairsPerSample,
      pair_selection: selection,
      max_new_tokens: trainer.max_new_tokens,
      temperature: trainer.temperature,
      top_p: trainer.top_p,
      top_k: trainer.top_k,
      stop_strings: trainer.stop_strings,
      seed: trainer.seed,
    };
    const agents = models.map((m) => LanguageModel.load(m));
    pairs = await samplePreferencePairs(env.task(split), agents, sampling, (done, total, n) => log(`[reward-model] item ${done}/${total}: ${n} pairs`));
  }
  if (pairs.length === 0) throw new Error('no preference pairs: every item gave tied rewards; sample more candidates (--candidates) or give --pairs');
  if (o.savePairs) writePreferencePairs(o.savePairs, pairs);
  const base = o.base ?? models[0];
  const rm = RewardModel.create(base, models.length, train);
  const { logs } = trainRewardModel(rm, pairs, train, {
    onStep: (l) =>
      log(`[reward-model] epoch ${l.epoch + 1} step ${l.step}: loss ${l.loss.toFixed(4)} accuracy ${l.accuracy.toFixed(2)} margin ${l.margin.toFixed(3)}`),
  });
  mkdirSync(dir, { recursive: true });
  rm.save(dir, { ...train, pairs: pairs.length, base_model: base });
  return { dir, pairs: pairs.length, logs };
}
