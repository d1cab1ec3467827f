/**
 * TRL `GRPOConfig` names in a magrpo trainer config: the ones whose meaning is the same are
 * rewritten to magrpo keys before validation; the ones with no equivalent get an error that says
 * so. The table here is the one in docs/trl-names.md (a test keeps them in step).
 */

/** A TRL key that magrpo accepts: the magrpo keys it sets, and how its value converts. */
interface TrlAlias {
  /** The magrpo keys this name sets; giving one of them too is an error. */
  sets: readonly string[];
  /** Magrpo values for a TRL value (and the whole section, for keys that depend on others), or an error message. */
  convert: (value: unknown, section: Readonly<Record<string, unknown>>) => Record<string, unknown> | string;
}

const same = (key: string): TrlAlias => ({ sets: [key], convert: (v) => ({ [key]: v }) });

function enumMap(key: string, values: Record<string, string>, why: string): TrlAlias {
  return {
    sets: [key],
    convert: (v) =>
      typeof v === 'string' && v in values
        ? { [key]: values[v] }
        : `got ${JSON.stringify(v)}: magrpo accepts ${Object.keys(values)
            .map((x) => JSON.stringify(x))
            .join(', ')} (${why})`,
  };
}

/** Reads an integer ≥ 1 of a TRL batch key, or says why not. */
function positiveInt(name: string, v: unknown): number | string {
  return typeof v === 'number' && Number.isInteger(v) && v >= 1 ? v : `${name}: got ${JSON.stringify(v)}, expected an integer ≥ 1`;
}

/**
 * TRL counts completions per optimizer step (per_device_train_batch_size × gradient_accumulation_steps
 * on one process); magrpo counts node samples of G completions each (rollout_buffer_size, one
 * optimizer step per drain when train_batch_size is null).
 */
function completionsPerStep(_v: unknown, s: Readonly<Record<string, unknown>>): Record<string, unknown> | string {
  if (s.per_device_train_batch_size === undefined)
    return 'gradient_accumulation_steps needs per_device_train_batch_size (together they give rollout_buffer_size)';
  const perDevice = positiveInt('per_device_train_batch_size', s.per_device_train_batch_size);
  const accum = positiveInt('gradient_accumulation_steps', s.gradient_accumulation_steps ?? 1);
  const g = s.num_generations ?? 4;
  if (typeof perDevice === 'string') return perDevice;
  if (typeof accum === 'string') return accum;
  if (typeof g !== 'number') return 'needs a numeric num_generations';
  const total = perDevice * accum;
  if (total % g !== 0) return `per_device_train_batch_size × gradient_accumulation_steps (${total}) must be a multiple of num_generations (${g}), as in TRL`;
  return { rollout_buffer_size: total / g, train_batch_size: null };
}

/** Accepted TRL names, by TRL name. */
export const TRL_ALIASES: Readonly<Record<string, TrlAlias>> = {
  learning_rate: same('agent_learning_rate'),
  max_completion_length: same('max_new_tokens'),
  num_iterations: same('ppo_epochs'),
  epsilon: same('ppo_clip_eps'),
  adam_epsilon: same('adam_eps'),
  // TRL's β > 0 adds β·KL(k3) to the loss, aggregated like the policy loss: magrpo's loss mode.
  beta: {
    sets: ['reference_kl_coef', 'reference_kl_enabled'],
    convert: (v, s) =>
      typeof v === 'number' && v >= 0
        ? { reference_kl_coef: v, reference_kl_enabled: v > 0, ...(s.reference_kl_mode === undefined ? { reference_kl_mode: 'loss' } : {}) }
        : `got ${JSON.stringify(v)}, expected a number ≥ 0`,
  },
  loss_type: enumMap(
    'loss_aggregation',
    { grpo: 'token_mean', dr_grpo: 'constant_norm' },
    'bnpo, dapo and the others normalise by the tokens of the whole batch, which magrpo does not do; sequence_sum is the MAGRPO loss',
  ),
  lr_scheduler_type: enumMap(
    'lr_scheduler',
    { constant: 'constant', constant_with_warmup: 'constant', linear: 'linear', cosine: 'cosine' },
    'the other transformers schedules have no magrpo equivalent',
  ),
  scale_rewards: {
    sets: ['advantage_normalization'],
    convert: (v) =>
      v === true || v === 'group'
        ? { advantage_normalization: true }
        : v === false || v === 'none'
          ? { advantage_normalization: false }
          : `got ${JSON.stringify(v)}: magrpo accepts true/"group" or false/"none" ("batch" has no equivalent)`,
  },
  adam_beta1: {
    sets: ['adam_betas'],
    convert: (v, s) => ({ adam_betas: [v, s.adam_beta2 ?? 0.999] }),
  },
  adam_beta2: {
    sets: ['adam_betas'],
    convert: (v, s) => ({ adam_betas: [s.adam_beta1 ?? 0.9, v] }),
  },
  per_device_train_batch_size: { sets: ['rollout_buffer_size', 'train_batch_size'], convert: completionsPerStep },
  gradient_accumulation_steps: { sets: ['rollout_buffer_size', 'train_batch_size'], convert: completionsPerStep },
};

/** TRL / transformers keys magrpo has no equivalent for, with what to use instead. */
export const TRL_WITHOUT_EQUIVALENT: Readonly<Record<string, string>> = {
  use_vllm: 'generation runs in-process on the CPU engine (no vLLM)',
  vllm_mode: 'generation runs in-process on the CPU engine (no vLLM)',
  max_prompt_length: 'magrpo does not truncate prompts; env.max_prompt_tokens drops items whose prompt is too long',
  max_steps: 'training length is num_train_epochs over the training items; `magrpo train --max-items n` stops early',
  eval_steps: 'eval_interval counts training items, not optimizer steps',
  eval_strategy: 'eval_interval (0 = never) decides when to evaluate',
  save_strategy: 'save_steps (0 = only at the end) decides when to checkpoint',
  logging_strategy: 'logging_steps decides when to log',
  warmup_ratio: 'give warmup_steps (optimizer steps)',
  min_p: 'sampling has temperature, top_p and top_k',
  repetition_penalty: 'sampling has temperature, top_p and top_k',
  generation_kwargs: 'sampling has temperature, top_p, top_k and stop_strings',
  epsilon_high: 'ppo_clip_eps clips symmetrically',
  delta: 'ppo_clip_eps clips symmetrically, with no upper bound on the ratio',
  importance_sampling_level: 'the PPO ratio is per token',
  mask_truncated_completions: 'truncated completions are trained',
  top_entropy_quantile: 'every completion token is trained',
  sync_ref_model: 'the reference model is the frozen starting model',
  ref_model_mixup_alpha: 'the reference model is the frozen starting model',
  ref_model_sync_steps: 'the reference model is the frozen starting model',
  reward_weights: "the environment's joint reward weighs its own components (reward_processor scales the total)",
  generation_batch_size: 'rollout_buffer_size node samples are generated per update',
  steps_per_generation: 'train_batch_size splits a drained buffer into optimizer steps',
  per_device_eval_batch_size: 'evaluation samples every eval episode of a turn in one batch per agent',
  gradient_checkpointing: 'the CPU engine keeps activations',
  bf16: 'training runs in float32',
  fp16: 'training runs in float32',
  tf32: 'training runs in float32',
  torch_compile: 'magrpo does not use PyTorch',
  use_liger_loss: 'magrpo does not use PyTorch',
  optim: 'the optimizer is AdamW (adam_betas, adam_eps, weight_decay)',
  lr_scheduler_kwargs: 'lr_scheduler has no options',
  disable_dropout: 'magrpo models have no dropout',
  log_completions: 'the run config\'s top-level "samples" section records completions',
  num_completions_to_print: 'the run config\'s top-level "samples" section records completions',
  logging_dir: 'logs go to output_dir (the run directory)',
  run_name: 'set the top-level run_name of the run config',
  push_to_hub: 'the trained agents are Hugging Face folders under final/',
  hub_model_id: 'the trained agents are Hugging Face folders under final/',
  model_init_kwargs: 'models are read from Hugging Face folders as they are',
  remove_unused_columns: 'items are passed to the task as they are',
  shuffle_dataset: 'training items are visited in order',
  dataloader_num_workers: 'items are read in-process',
  cache_implementation: 'the KV cache is built in',
  ds3_gather_for_generation: 'no DeepSpeed on CPU',
};

/** What a config says about one TRL name: accepted (as which key) or without equivalent. */
export function trlNote(key: string): string | null {
  if (key.startsWith('vllm_')) return TRL_WITHOUT_EQUIVALENT.use_vllm;
  return TRL_WITHOUT_EQUIVALENT[key] ?? null;
}

/** The TRL names a typed config may use (for the library API's MagrpoConfigInput). */
export interface TrlConfigNames {
  learning_rate?: number | number[];
  beta?: number;
  max_completion_length?: number;
  num_iterations?: number;
  epsilon?: number | null;
  loss_type?: 'grpo' | 'dr_grpo';
  lr_scheduler_type?: 'constant' | 'constant_with_warmup' | 'linear' | 'cosine';
  scale_rewards?: boolean | 'group' | 'none';
  adam_beta1?: number;
  adam_beta2?: number;
  adam_epsilon?: number;
  per_device_train_batch_size?: number;
  gradient_accumulation_steps?: number;
}

/** The result of rewriting TRL names: the section in magrpo keys, problems, and where each magrpo key came from. */
export interface TrlRewrite {
  section: Record<string, unknown>;
  issues: { key: string; message: string }[];
  /** magrpo key → the TRL key that set it (to report a bad value under the name the user wrote). */
  origin: Record<string, string>;
}

/**
 * Rewrites the TRL names of a trainer section to magrpo keys (`known` = the section's own keys,
 * which always win: a TRL name is only an alias while magrpo has no key of that name).
 * Unknown keys are left for the schema to report.
 */
export function applyTrlNames(raw: unknown, known: readonly string[]): TrlRewrite {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return { section: raw as Record<string, unknown>, issues: [], origin: {} };
  const input = raw as Record<string, unknown>;
  const own = new Set(known);
  const used = Object.keys(input).filter((k) => !own.has(k) && k in TRL_ALIASES);
  const section: Record<string, unknown> = Object.fromEntries(Object.entries(input).filter(([k]) => !used.includes(k)));
  const issues: TrlRewrite['issues'] = [];
  const origin: Record<string, string> = {};
  const done = new Set<TrlAlias['convert']>();
  for (const key of used) {
    const alias = TRL_ALIASES[key];
    const clash = alias.sets.filter((k) => k in input);
    if (clash.length) {
      issues.push({ key, message: `TRL's name for ${alias.sets.join(' + ')}, and ${clash.join(', ')} is given too: keep one of them` });
      continue;
    }
    if (done.has(alias.convert)) continue; // a pair of TRL keys converted together (the batch sizes)
    done.add(alias.convert);
    const out = alias.convert(input[key], input);
    if (typeof out === 'string') {
      issues.push({ key, message: out });
      continue;
    }
    for (const [k, v] of Object.entries(out)) {
      section[k] = v;
      origin[k] = key;
    }
  }
  return { section, issues, origin };
}

/** Known keys plus the accepted TRL names, for did-you-mean on unknown keys. */
export function withTrlNames(known: readonly string[]): string[] {
  return [...known, ...Object.keys(TRL_ALIASES).filter((k) => !known.includes(k))];
}
