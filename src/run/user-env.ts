/**
 * Turns a config's `env` section into an Environment: a ready-made one from the registry, or the
 * user's own module (TypeScript loaded at run time through tsx) exporting a Task, an
 * Environment, or a function of the options returning either. A bare Task gets the generic
 * metrics below and no baselines.
 */
import { isAbsolute, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Environment, EpisodeResult } from '../envs/environment.js';
import { envEntry } from '../envs/registry.js';
import { loadTokenizer } from '../model/pretrained.js';
import { ConfigError } from '../rl/config.js';
import { formattersFor, type Task } from '../rl/task.js';
import type { RunConfig } from './run-config.js';

/** A user module that does not export something usable; names the file and what was found. */
export class EnvModuleError extends Error {
  override readonly name = 'EnvModuleError';
  readonly code = 'BAD_ENV_MODULE';
  constructor(
    readonly file: string,
    message: string,
  ) {
    super(`${file}: ${message}`);
  }
}

type AnyEnv = Environment<unknown>;

const isEnvironment = (x: unknown): x is AnyEnv =>
  typeof x === 'object' && x !== null && typeof (x as AnyEnv).task === 'function' && typeof (x as AnyEnv).defaultSplits === 'function';
const isTask = (x: unknown): x is Task<unknown> =>
  typeof x === 'object' && x !== null && Array.isArray((x as Task<unknown>).dataset) && (x as Task<unknown>).reward !== undefined;

/** Imports a .ts/.mts/.cts file through tsx (no build step for users), anything else natively. */
export async function importModule(file: string): Promise<Record<string, unknown>> {
  const url = pathToFileURL(file).href;
  if (/\.[mc]?ts$/.test(file)) {
    const { tsImport } = await import('tsx/esm/api');
    return (await tsImport(url, import.meta.url)) as Record<string, unknown>;
  }
  return (await import(url)) as Record<string, unknown>;
}

export async function loadEnvironment(env: RunConfig['env'], baseDir: string): Promise<AnyEnv> {
  if (env.name !== undefined) {
    const entry = envEntry(env.name);
    if (!entry) throw new EnvModuleError(env.name, 'unknown environment');
    const options = { ...env.options };
    for (const key of entry.pathOptions ?? []) if (typeof options[key] === 'string' && !isAbsolute(options[key])) options[key] = resolve(baseDir, options[key]);
    return entry.load(options);
  }
  const file = resolve(baseDir, env.module as string);
  let mod: Record<string, unknown>;
  try {
    mod = await importModule(file);
  } catch (err) {
    throw new EnvModuleError(file, `could not be loaded: ${(err as Error).message}`);
  }
  // tsx may wrap a CommonJS-looking module's exports in `default`.
  const exported = mod.default ?? mod.environment ?? mod.task;
  let value = typeof exported === 'function' ? await (exported as (o: unknown) => unknown)(env.options) : exported;
  if (value && typeof value === 'object' && 'default' in value && !isTask(value) && !isEnvironment(value)) value = (value as { default: unknown }).default;
  if (isEnvironment(value)) return value;
  if (isTask(value)) return taskEnvironment(value, file);
  throw new EnvModuleError(
    file,
    `expected a default (or \`task\` / \`environment\`) export that is a Task ({dataset, reward, ...}), an Environment, or a function of the options returning one; found exports: ${Object.keys(mod).join(', ') || '(none)'}`,
  );
}

/** A plain Task as an Environment: its own splits, generic metrics, no baselines. */
export function taskEnvironment<Item>(task: Task<Item>, source: string): Environment<Item> {
  const numAgents = Array.isArray(task.formatters) ? task.formatters.length : 2;
  return {
    name: task.name ?? source,
    description: `custom task from ${source}`,
    numAgents,
    task: (o) => ({ ...task, dataset: o?.train ?? task.dataset, evalDataset: o?.eval ?? task.evalDataset }),
    defaultSplits: () => ({ train: [...task.dataset], eval: [...(task.evalDataset ?? [])] }),
    metrics: genericMetrics,
    baselines: [],
  };
}

/** Mean reward and components, response time and tokens per episode. */
export function genericMetrics(episodes: readonly EpisodeResult[]): Record<string, number> {
  const n = Math.max(1, episodes.length);
  const sum = (f: (e: EpisodeResult) => number) => episodes.reduce((s, e) => s + f(e), 0) / n;
  const out: Record<string, number> = { return: sum((e) => e.reward) };
  for (const name of new Set(episodes.flatMap((e) => Object.keys(e.components)))) out[name] = sum((e) => e.components[name] ?? 0);
  out.response_s = sum((e) => e.responseSeconds);
  out.tokens = sum((e) => e.outputTokens);
  return out;
}

/** The environment's splits, cut to the config's train_size / eval_size. */
export function splits(env: AnyEnv, section: RunConfig['env'], keep: (item: unknown) => boolean = () => true): { train: unknown[]; eval: unknown[] } {
  const s = env.defaultSplits();
  const train = s.train.filter(keep);
  const ev = s.eval.filter(keep);
  return {
    train: section.train_size === null ? train : train.slice(0, section.train_size),
    eval: section.eval_size === null ? ev : ev.slice(0, section.eval_size),
  };
}

/**
 * Keeps items whose prompt fits `maxTokens` for every agent, counted with that agent's tokenizer;
 * the prompts of the task the agents play (`play`, when their algorithm changes it).
 */
export function promptFits(
  env: AnyEnv,
  models: readonly string[],
  maxTokens: number,
  play: (task: Task<unknown>) => Task<unknown> = (t) => t,
): (item: unknown) => boolean {
  const all = env.defaultSplits();
  const formatters = formattersFor(play(env.task({ train: all.train, eval: all.eval })), models.length);
  const tokenizers = models.map((m) => loadTokenizer(m));
  return (item) => formatters.every((f, i) => tokenizers[i].promptIds(f(item)).length <= maxTokens);
}

/**
 * `env.options.prompt_style: chat` renders every prompt with the agent's chat template: a model
 * without one is a ConfigError naming the option and each such model, before anything loads.
 */
export function checkChatTemplates(env: RunConfig['env'], models: readonly string[], source: string): void {
  if (env.name === undefined || env.options.prompt_style !== 'chat') return;
  const missing = [...new Set(models)].filter((m) => !loadTokenizer(m).hasChatTemplate);
  if (missing.length === 0) return;
  throw new ConfigError(
    missing.map((m) => ({
      path: 'env.options.prompt_style',
      message: `got "chat", but the model ${m} has no chat template (chat_template in tokenizer_config.json, chat_template.jinja, or a GGUF file's tokenizer.chat_template) — use an instruction-tuned model that has one, or prompt_style instruct`,
    })),
    source,
  );
}
