/**
 * From a config file (or a run directory's resolved config) to everything a command needs: the
 * validated config, the environment and its splits, one model folder per agent and the resolved
 * trainer config. Input paths in a config file are relative to that file.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, resolve } from 'node:path';
import type { Environment } from '../envs/environment.js';
import { envEntry } from '../envs/registry.js';
import { findPullable, resolvePulled } from '../model/pull.js';
import { algorithmNamed } from '../rl/algorithms/index.js';
import { didYouMean, type MagrpoConfig, resolveConfig } from '../rl/config.js';
import type { Task } from '../rl/task.js';
import { loadRunConfig } from './config-file.js';
import type { RunConfig } from './run-config.js';
import { RUN_FILES } from './run-dir.js';
import { checkChatTemplates, loadEnvironment, promptFits, splits } from './user-env.js';

export interface PreparedRun {
  /** The config file read. */
  file: string;
  /** The config with absolute input paths and the resolved trainer section. */
  config: RunConfig;
  env: Environment<unknown>;
  split: { train: unknown[]; eval: unknown[] };
  /** One model folder per agent. */
  models: string[];
  trainer: MagrpoConfig;
}

/** A config file, or a run directory (its config.yaml); a missing one is an error with the nearest name. */
export function configFileOf(target: string): string {
  if (!existsSync(target)) {
    const parent = dirname(target);
    const near = existsSync(parent) && statSync(parent).isDirectory() ? didYouMean(basename(target), readdirSync(parent)) : null;
    throw new Error(`${target}: no such config file or run directory${near ? ` — did you mean ${join(parent, near)}?` : ''}`);
  }
  if (!statSync(target).isDirectory()) return target;
  const file = join(target, RUN_FILES.config);
  if (!existsSync(file)) throw new Error(`${target}: not a run directory (no ${RUN_FILES.config}); give a run directory or a config file`);
  return file;
}

export async function prepareRun(target: string, sets: readonly string[] = []): Promise<PreparedRun> {
  const file = configFileOf(target);
  const { config, raw } = loadRunConfig(file, sets);
  const base = dirname(resolve(file));
  const abs = (p: string) => (isAbsolute(p) ? p : resolve(base, p));
  // `model:` may name a pulled model (`magrpo pull`) instead of a path.
  const modelPath = (p: string) => (!existsSync(abs(p)) && findPullable(p) ? resolvePulled(p) : abs(p));
  const env = await loadEnvironment(config.env, base);
  const explicitN = (raw.trainer as { num_agents?: number } | undefined)?.num_agents;
  const numAgents = config.models?.length ?? explicitN ?? env.numAgents;
  const models = config.models ? config.models.map(modelPath) : new Array<string>(numAgents).fill(modelPath(config.model as string));
  const trainer = resolveConfig({ ...config.trainer, num_agents: models.length }, `${file} (trainer)`);
  // trainer.reward_model is an input path like model:, relative to the config file.
  if (trainer.reward_model !== null) trainer.reward_model = abs(trainer.reward_model);
  checkChatTemplates(config.env, models, file);
  const options = { ...config.env.options };
  for (const key of (config.env.name && envEntry(config.env.name)?.pathOptions) || [])
    if (typeof options[key] === 'string') options[key] = abs(options[key] as string);
  const resolved: RunConfig = {
    ...config,
    env: { ...config.env, options, ...(config.env.module ? { module: abs(config.env.module) } : {}) },
    ...(config.model ? { model: modelPath(config.model) } : { models }),
    trainer,
  };
  const team = algorithmNamed(trainer.algorithm).team;
  const play = (task: Task<unknown>) => team?.(task, trainer).task ?? task;
  const keep = config.env.max_prompt_tokens === null ? undefined : promptFits(env, models, config.env.max_prompt_tokens, play);
  return { file, config: resolved, env, split: splits(env, config.env, keep), models, trainer };
}
