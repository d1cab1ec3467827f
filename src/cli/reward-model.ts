/** `magrpo reward-model <config>`: MARLHF's first stage (run/reward-model.ts). */
import { type Command, InvalidArgumentError } from 'commander';
import { type RewardModelRunOptions, rewardModelRun } from '../run/reward-model.js';
import { CLI, floatOption, intOption } from './options.js';

/** The run's options as commander names them; the training knobs carry the CLI's camelCase names. */
type Flags = Pick<RewardModelRunOptions, 'out' | 'pairs' | 'savePairs' | 'base' | 'candidates' | 'pairsPerSample' | 'pairSelection' | 'set'> & {
  learningRate?: number;
  epochs?: number;
  batchSize?: number;
  maxLength?: number;
  freezeBackbone?: boolean;
  seed?: number;
};

function selectionOption(v: string): 'reward_gap' | 'all' | 'random' {
  if (v !== 'reward_gap' && v !== 'all' && v !== 'random') throw new InvalidArgumentError(`expected reward_gap, all or random, got "${v}"`);
  return v;
}

export function registerRewardModel(program: Command): void {
  program
    .command('reward-model')
    .description('Train a joint reward model on preference pairs of the team (MARLHF stage 1); trainer.reward_model then trains on its reward')
    .argument('<config>', "run config (YAML): its env's train split, team and sampling keys")
    .option('--out <dir>', "where the reward model is written (default: the config's trainer.reward_model)")
    .option(
      '--pairs <file.jsonl>',
      'preference pairs to train on, rows {"prompts": [...], "chosen": [...], "rejected": [...]} (default: sampled, labelled by the env reward)',
    )
    .option('--save-pairs <file.jsonl>', 'also write the pairs trained on')
    .option('--base <model>', "the reward model's backbone (default: the first agent's model)")
    .option('--candidates <n>', 'sampled pairs: completions per agent and item, preference_num_candidates (default 80)', intOption(2))
    .option('--pairs-per-sample <n>', 'sampled pairs: pairs kept per item, preference_pairs_per_sample (default 16; "null" = all)', (v: string) =>
      v === 'null' ? null : intOption(1)(v),
    )
    .option('--pair-selection <mode>', 'sampled pairs: reward_gap (default), all or random', selectionOption)
    .option('--learning-rate <lr>', 'reward_learning_rate (default 1e-5)', floatOption(Number.MIN_VALUE))
    .option('--epochs <n>', 'reward_num_train_epochs (default 1)', intOption(1))
    .option('--batch-size <n>', 'reward_train_batch_size: pairs per step (default 1)', intOption(1))
    .option('--max-length <n>', 'reward_max_length: tokens of a joint text kept, its end (default: all)', intOption(1))
    .option('--freeze-backbone', 'reward_freeze_backbone: train the head only')
    .option('--seed <n>', 'head initialisation and shuffles (default: trainer.seed)', intOption(0))
    .option('--set <key=value...>', 'override a config key, value parsed as YAML (repeatable)', (v: string, acc: string[] = []) => [...acc, v])
    .addHelpText(
      'after',
      `
Examples:
  ${CLI} reward-model configs/marlhf-tldr.yaml --candidates 8 --pairs-per-sample 4
  ${CLI} train configs/marlhf-tldr.yaml           # RL on the reward model's reward
  ${CLI} reward-model configs/marlhf-tldr.yaml --pairs prefs.jsonl --out runs/rm`,
    )
    .action(async (config: string, f: Flags) => {
      const r = await rewardModelRun(config, {
        out: f.out,
        pairs: f.pairs,
        savePairs: f.savePairs,
        base: f.base,
        candidates: f.candidates,
        pairsPerSample: f.pairsPerSample,
        pairSelection: f.pairSelection,
        learning_rate: f.learningRate,
        num_train_epochs: f.epochs,
        train_batch_size: f.batchSize,
        max_length: f.maxLength,
        freeze_backbone: f.freezeBackbone,
        seed: f.seed,
        set: f.set,
      });
      const last = r.logs.at(-1);
      process.stdout.write(`${r.dir}: reward model trained on ${r.pairs} pairs, ${r.logs.length} steps, last loss ${last?.loss.toFixed(4)}\n`);
    });
}
