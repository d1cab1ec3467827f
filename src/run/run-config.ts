/**
 * The run config file (`magrpo train run.yaml`): one schema for everything a run needs. The
 * `trainer` section IS the trainer's MagrpoConfigSchema (keys declared once, in rl/config.ts);
 * this file adds what surrounds training: the environment, the models, the run directory,
 * the final evaluation, rollout samples and the dashboard. Types, validation, `magrpo schema`
 * and configs/schema.json all come from here.
 */
import { z } from 'zod';
import { ENV_NAMES, ENVIRONMENTS, envEntry } from '../envs/registry.js';
import {
  CONFIG_LIMITS,
  type ConfigIssue,
  didYouMean,
  formatIssues,
  MagrpoConfigSchema,
  readTrainerSection,
  TRAINER_KEYS,
  unknownTrainerKey,
} from '../rl/config.js';
import { TRL_ALIASES } from '../rl/trl-names.js';

const posInt = () => z.number().int().min(1);

export const EnvSectionSchema = z.strictObject({
  name: z.enum(ENV_NAMES).optional().describe('a ready-made environment (give name or module)'),
  module: z.string().min(1).optional().describe('a .ts/.js file exporting a Task or an Environment, relative to this config file'),
  options: z.record(z.string(), z.unknown()).default({}).describe("the environment's own options (see `magrpo schema`)"),
  train_size: posInt().nullable().default(null).describe('train on the first n items of the training split (null = all)'),
  eval_size: posInt().nullable().default(null).describe('evaluate on the first n items of the eval split (null = all)'),
  max_prompt_tokens: posInt()
    .nullable()
    .default(null)
    .describe("drop items whose prompt is longer than this for any agent (in that agent's tokens), before train_size/eval_size apply (null = keep all)"),
});

export const EvalSectionSchema = z.strictObject({
  at_end: z.boolean().default(true).describe('after training, evaluate the team and the baselines on the eval split (report.md)'),
  baselines: z
    .union([z.enum(['all', 'none']), z.array(z.string()).min(1)])
    .default('all')
    .describe("the environment's inference baselines to compare with: all, none, or a list of names"),
  samples_per_item: posInt().max(CONFIG_LIMITS.generations).default(1).describe('episodes per eval item (pass@k needs k)'),
  seed: z.number().int().min(0).default(0).describe('sampling seed of the evaluation'),
  temperature: z.number().min(0).nullable().default(null).describe('sampling temperature (null = trainer.temperature; 0 = greedy)'),
  top_p: z.number().gt(0).max(1).nullable().default(null).describe('nucleus threshold (null = trainer.top_p)'),
  top_k: posInt()
    .max(1 << 20)
    .nullable()
    .default(null)
    .describe('top-k (null = trainer.top_k)'),
  max_new_tokens: posInt().max(CONFIG_LIMITS.newTokens).nullable().default(null).describe('generation cap (null = trainer.max_new_tokens)'),
});

export const SamplesSectionSchema = z.strictObject({
  every: z.number().int().min(0).default(1).describe('record the rollout trees of items 0, n, 2n, … of each epoch in samples.jsonl (0 = never)'),
  max_records: posInt().max(1_000_000).default(500).describe('stop recording after this many trees (bounds samples.jsonl)'),
  max_chars: posInt().max(10_000_000).default(2000).describe('truncate every prompt and completion to this many characters'),
});

export const DashboardSectionSchema = z.strictObject({
  enabled: z.boolean().default(false).describe('serve the live dashboard while training (same as --dashboard)'),
  port: z.number().int().min(0).max(65535).default(6007).describe('port on 127.0.0.1 (0 = any free port)'),
});

export const RunConfigSchema = z
  .strictObject({
    env: EnvSectionSchema.describe('what the team is trained on'),
    model: z.string().min(1).optional().describe('one model folder for every agent (relative to this config file)'),
    models: z.array(z.string().min(1)).min(1).optional().describe('one model folder per agent (a heterogeneous team)'),
    trainer: MagrpoConfigSchema.default(MagrpoConfigSchema.parse({})).describe(
      'MAGRPO trainer settings (CoMLRL names; TRL GRPOConfig names such as learning_rate are accepted, docs/trl-names.md)',
    ),
    output_dir: z.string().min(1).default('runs').describe('parent folder of run directories (relative to the working directory)'),
    run_name: z
      .string()
      .regex(/^[\w.-]+$/, 'letters, digits, _ . - only')
      .nullable()
      .default(null)
      .describe('run directory name (null = a timestamp)'),
    eval: EvalSectionSchema.default(EvalSectionSchema.parse({})).describe('the final evaluation against baselines'),
    samples: SamplesSectionSchema.default(SamplesSectionSchema.parse({})).describe('rollout trees recorded for the dashboard'),
    dashboard: DashboardSectionSchema.default(DashboardSectionSchema.parse({})).describe('the local web dashboard'),
  })
  .superRefine((c, ctx) => {
    if ((c.env.name === undefined) === (c.env.module === undefined))
      ctx.addIssue({ code: 'custom', path: ['env'], message: 'give exactly one of env.name (a ready-made environment) or env.module (your own file)' });
    if ((c.model === undefined) === (c.models === undefined))
      ctx.addIssue({ code: 'custom', path: ['model'], message: 'give exactly one of model (one folder for all agents) or models (one per agent)' });
    if (c.trainer.output_dir !== null)
      ctx.addIssue({
        code: 'custom',
        path: ['trainer', 'output_dir'],
        message: 'set by magrpo to the run directory: use the top-level output_dir and run_name',
      });
  });

export type RunConfigInput = z.input<typeof RunConfigSchema>;
export type RunConfig = z.output<typeof RunConfigSchema>;

type AnySchema = { description?: string; _zod: { def: { innerType?: AnySchema; shape?: Record<string, AnySchema> } } };

/** The schema at a key path, through defaults, nullables and optionals (null if there is none). */
function schemaAt(path: readonly (string | number)[]): AnySchema | null {
  const unwrap = (x: AnySchema) => {
    while (x._zod.def.innerType) x = x._zod.def.innerType;
    return x;
  };
  let s: AnySchema = RunConfigSchema as unknown as AnySchema;
  for (const key of path) {
    const next = unwrap(s)._zod.def.shape?.[String(key)];
    if (!next) return null;
    s = next;
  }
  return s;
}

/** Keys allowed under a path, for did-you-mean. */
function keysAt(path: (string | number)[]): string[] {
  const s = schemaAt(path);
  let inner = s;
  while (inner?._zod.def.innerType) inner = inner._zod.def.innerType;
  return Object.keys(inner?._zod.def.shape ?? {});
}

function valueAt(raw: unknown, path: string): unknown {
  let v = raw;
  for (const k of path.split('.')) v = v !== null && typeof v === 'object' ? (v as Record<string, unknown>)[k] : undefined;
  return v;
}

/** Unknown keys of the trainer section (and trainer keys put at the top level) get a specific message. */
function unknownKeyHint(path: (string | number)[], key: string): string | null {
  if (path.length === 1 && path[0] === 'trainer') return unknownTrainerKey(key, TRAINER_KEYS);
  if (path.length === 0 && (TRAINER_KEYS.includes(key) || key in TRL_ALIASES)) return 'a trainer setting: put it under "trainer:"';
  return null;
}

/**
 * The run config with the trainer section read as the schema reads it (rl/config.ts
 * readTrainerSection: TRL names rewritten, unset removed keys dropped), the problems
 * of that rewrite, and a function that reports a rewritten key's problems under the TRL name.
 */
function rewriteTrlNames(raw: unknown): { raw: unknown; issues: ConfigIssue[]; rename: (i: ConfigIssue) => ConfigIssue } {
  const trainer = (raw as { trainer?: unknown } | null)?.trainer;
  if (trainer === undefined) return { raw, issues: [], rename: (i) => i };
  const trl = readTrainerSection(trainer);
  const rename = (i: ConfigIssue): ConfigIssue => {
    const [section, key, ...rest] = i.path.split('.');
    const from = section === 'trainer' ? trl.origin[key] : undefined;
    return from ? { path: ['trainer', from, ...rest].join('.'), message: `(as ${key}) ${i.message}` } : i;
  };
  return {
    raw: { ...(raw as object), trainer: trl.section },
    issues: trl.issues.map((i) => ({ path: `trainer.${i.key}`, message: i.message })),
    rename,
  };
}

/** Every problem of a raw config, each by key path: the schema, then the environment's own options. */
export function checkRunConfig(input: unknown): { config: RunConfig | null; issues: ConfigIssue[] } {
  const trl = rewriteTrlNames(input);
  const raw = trl.raw;
  const r = RunConfigSchema.safeParse(raw, { reportInput: true });
  const issues = [...trl.issues, ...(r.success ? [] : describeIssues(r.error, keysAt, raw, [], unknownKeyHint).map(trl.rename))];
  const env = (raw as { env?: { name?: unknown; options?: unknown } } | null)?.env;
  const entry = typeof env?.name === 'string' ? envEntry(env.name) : undefined;
  if (typeof env?.name === 'string' && !entry) {
    const hint = didYouMean(env.name, ENV_NAMES);
    const i = issues.findIndex((x) => x.path === 'env.name');
    const msg = `got "${env.name}", expected one of ${ENV_NAMES.join(', ')}${hint ? ` — did you mean "${hint}"?` : ''}`;
    if (i >= 0) issues[i] = { path: 'env.name', message: msg };
  }
  if (entry && env?.options !== undefined) {
    const o = entry.options.safeParse(env.options, { reportInput: true });
    if (!o.success) {
      const known = Object.keys(entry.options.shape);
      issues.push(...describeIssues(o.error, () => known, raw, ['env', 'options']));
      if (known.length === 0 && o.error.issues.some((i) => i.code === 'unrecognized_keys'))
        issues.push({ path: 'env.options', message: `environment "${entry.name}" takes no options` });
    }
  }
  return { config: r.success && issues.length === 0 ? r.data : null, issues };
}

/**
 * Path-named messages (rl/config formatIssues) under `prefix`, plus the offending value where
 * zod's built-in message does not show it. Custom refinements already say what is wrong.
 */
function describeIssues(
  error: z.ZodError,
  known: (path: (string | number)[]) => string[],
  raw: unknown,
  prefix: string[],
  unknownKey?: (path: (string | number)[], key: string) => string | null,
): ConfigIssue[] {
  return error.issues.flatMap((issue) => {
    const one = formatIssues(new z.ZodError([issue]), (p) => known(p), unknownKey).map((i) => ({
      path: [...prefix, ...(i.path === '(root)' ? [] : [i.path])].join('.') || '(root)',
      message: i.message,
    }));
    return issue.code === 'custom' || issue.code === 'unrecognized_keys' ? one : one.map((i) => withGot(i, raw));
  });
}

/** Adds `got X` to a built-in message that does not show the offending value. */
function withGot(issue: ConfigIssue, raw: unknown): ConfigIssue {
  if (issue.message.startsWith('got ')) return issue;
  const v = valueAt(raw, issue.path);
  let message = issue.message.replace(/^Invalid input: /, '');
  const what = schemaAt(issue.path.split('.'))?.description;
  if (message === 'Invalid input' && what) message = `expected ${what}`;
  if (v === undefined || (typeof v === 'object' && v !== null)) return { path: issue.path, message };
  return { path: issue.path, message: `got ${JSON.stringify(v)}, ${message.replace(/^[A-Z]/, (c) => c.toLowerCase())}` };
}

/** JSON Schema for editors: the run config, with each environment's options under `if name = …`. */
export function runConfigJsonSchema(): Record<string, unknown> {
  const schema = z.toJSONSchema(RunConfigSchema, { io: 'input', unrepresentable: 'any' }) as unknown as Record<string, unknown> & {
    properties: { env: Record<string, unknown> };
  };
  schema.title = 'magrpo run config';
  // TRL names are accepted in the trainer section (rewritten before validation), so editors accept them too.
  const trainer = (schema.properties as unknown as Record<string, { properties: Record<string, unknown> }>).trainer;
  for (const [name, alias] of Object.entries(TRL_ALIASES))
    trainer.properties[name] = { description: `TRL GRPOConfig name: sets ${alias.sets.join(' and ')} (docs/trl-names.md)` };
  schema.properties.env.allOf = ENVIRONMENTS.map((e) => ({
    if: { properties: { name: { const: e.name } }, required: ['name'] },
    // biome-ignore lint/suspicious/noThenProperty: JSON Schema's if/then keywords
    then: { properties: { options: withoutDialect(z.toJSONSchema(e.options, { io: 'input' })) } },
  }));
  return schema;
}

function withoutDialect(s: object): object {
  const { $schema: _, ...rest } = s as Record<string, unknown>;
  return rest;
}
