/**
 * The pretraining config: one zod schema, each key with its default, range and description.
 * Unknown keys are errors; every problem is reported at once, each named by its key path.
 */
import { readFileSync } from 'node:fs';
import { parse, parseDocument } from 'yaml';
import { z } from 'zod';

const positiveInt = z.number().int().positive();

const DataSchema = z.strictObject({
  train: z.string().default('data/corpus/train.jsonl.gz').describe('training corpus (gzip JSONL of {source, text})'),
  validation: z.string().default('data/corpus/validation.jsonl.gz').describe('validation corpus, same format'),
  tokenizer: z.string().default('data/tokenizer').describe('folder with tokenizer.json and tokenizer_config.json'),
  max_train_docs: positiveInt.nullable().default(null).describe('use only the first N training documents (null = all); for tests'),
  card: z.string().default('data/README.md').describe('data card the model card links to'),
});

const ModelSchema = z.strictObject({
  hidden_size: positiveInt.describe('C: residual stream width'),
  intermediate_size: positiveInt.describe('F: SwiGLU inner width'),
  num_layers: positiveInt.describe('L: transformer blocks'),
  num_heads: positiveInt.describe('H: query heads (head size = hidden_size / num_heads)'),
  num_kv_heads: positiveInt.nullable().default(null).describe('key/value heads for grouped-query attention (null = num_heads)'),
  context_length: positiveInt.describe('T: training window and max_position_embeddings'),
  rope_theta: z.number().positive().default(10000).describe('RoPE base'),
  rms_norm_eps: z.number().positive().default(1e-5).describe('RMSNorm epsilon'),
  tie_word_embeddings: z.boolean().default(true).describe('share the embedding matrix with the LM head'),
});

const TrainSchema = z.strictObject({
  max_steps: positiveInt.describe('optimizer steps; the cosine schedule ends here'),
  micro_batch_size: positiveInt.describe('windows per forward/backward pass'),
  grad_accum_steps: positiveInt.default(1).describe('micro-batches summed into one optimizer step'),
  learning_rate: z.number().positive().describe('peak learning rate (after warmup)'),
  min_lr_ratio: z.number().min(0).max(1).default(0.1).describe('final learning rate as a fraction of the peak'),
  warmup_steps: z.number().int().min(0).default(0).describe('linear warmup steps from 0 to the peak'),
  weight_decay: z.number().min(0).default(0.1).describe('AdamW decoupled weight decay on matrices (not on norms)'),
  beta1: z.number().min(0).lt(1).default(0.9).describe('AdamW first-moment decay'),
  beta2: z.number().min(0).lt(1).default(0.95).describe('AdamW second-moment decay'),
  grad_clip: z.number().positive().nullable().default(1).describe('global gradient-norm clip (null = off)'),
});

const EvalSchema = z.strictObject({
  every_steps: positiveInt.describe('validation loss every N steps (and at the last step)'),
  num_windows: positiveInt.default(64).describe('fixed validation windows of context_length + 1 tokens'),
});

const CheckpointSchema = z.strictObject({
  every_steps: positiveInt.describe('save a resumable checkpoint every N steps (and at the last step)'),
  keep: positiveInt.default(2).describe('checkpoints kept on disk (oldest deleted first)'),
});

const ExportSchema = z.strictObject({
  dir: z.string().describe('Hugging Face model folder written after training (with README.md and eval.json)'),
  dtype: z.enum(['F32', 'F16', 'BF16']).default('F16').describe('storage dtype of model.safetensors'),
  code_eval_tasks: z.number().int().min(0).default(200).describe('Python completions sampled for the parse/pass evidence (0 = skip)'),
  code_eval_seed: z.number().int().min(0).default(7_000_001).describe('generatePyTasks seed of the held-out tasks (not the corpus seed)'),
  max_new_tokens: positiveInt.default(128).describe('tokens per sampled completion'),
  temperature: z.number().min(0).default(0.2).describe('sampling temperature of the card samples and code evidence'),
});

export const PretrainConfigSchema = z
  .strictObject({
    run_dir: z.string().describe('run folder: token cache, checkpoints, metrics.jsonl, loss plots'),
    seed: z.number().int().min(0).default(0).describe('seeds initialisation and window sampling'),
    init_from: z
      .string()
      .nullable()
      .default(null)
      .describe(
        'model folder whose weights start the run instead of a random initialisation (continued pretraining); its config must match `model` (null = from scratch)',
      ),
    precision: z
      .enum(['fp32', 'bf16', 'auto'])
      .default('fp32')
      .describe(
        'matrix products: fp32, or bf16 inputs with fp32 accumulation (fp32 master weights); auto: bf16 where the CPU runs it natively, else fp32; see docs/benchmarks.md',
      ),
    log_every: positiveInt.default(10).describe('steps between log lines when no progress bar is shown'),
    data: DataSchema.prefault({}).describe('corpus and tokenizer'),
    model: ModelSchema.describe('Llama-style architecture'),
    train: TrainSchema.describe('optimisation'),
    eval: EvalSchema.describe('validation loss'),
    checkpoint: CheckpointSchema.describe('resumable checkpoints'),
    export: ExportSchema.describe('the shipped model folder and its card'),
  })
  .superRefine((c, ctx) => {
    if (c.model.hidden_size % c.model.num_heads !== 0) {
      ctx.addIssue({ code: 'custom', path: ['model', 'num_heads'], message: `must divide hidden_size (${c.model.hidden_size})` });
    } else if ((c.model.hidden_size / c.model.num_heads) % 2 !== 0) {
      ctx.addIssue({ code: 'custom', path: ['model', 'num_heads'], message: 'head size (hidden_size / num_heads) must be even for RoPE' });
    }
    const kv = c.model.num_kv_heads;
    if (kv !== null && c.model.num_heads % kv !== 0) {
      ctx.addIssue({ code: 'custom', path: ['model', 'num_kv_heads'], message: `must divide num_heads (${c.model.num_heads})` });
    }
    if (c.train.warmup_steps >= c.train.max_steps) {
      ctx.addIssue({ code: 'custom', path: ['train', 'warmup_steps'], message: `must be below max_steps (${c.train.max_steps})` });
    }
  });

export type PretrainConfig = z.infer<typeof PretrainConfigSchema>;

export interface ConfigIssue {
  /** Dotted key path, e.g. `train.learning_rate`. */
  path: string;
  message: string;
}

/** A config that cannot be used; lists every problem as `path: message`. */
export class PretrainConfigError extends Error {
  readonly code = 'BAD_CONFIG';
  constructor(
    readonly file: string,
    readonly issues: ConfigIssue[],
  ) {
    super(`${file}: invalid pretraining config\n${issues.map((i) => `  ${i.path}: ${i.message}`).join('\n')}`);
    this.name = 'PretrainConfigError';
  }
}

/** Validates a parsed config object; `file` only names the source in errors. */
export function parsePretrainConfig(raw: unknown, file = '<config>'): PretrainConfig {
  const result = PretrainConfigSchema.safeParse(raw);
  if (result.success) return result.data;
  throw new PretrainConfigError(file, result.error.issues.flatMap(toIssues));
}

/** One issue per offending key: an unknown key is reported at its own path. */
function toIssues(i: z.core.$ZodIssue): ConfigIssue[] {
  const at = (path: PropertyKey[]) => (path.length > 0 ? path.join('.') : '(root)');
  if (i.code === 'unrecognized_keys') return i.keys.map((k) => ({ path: at([...i.path, k]), message: 'unknown key' }));
  return [{ path: at(i.path), message: i.message }];
}

/** Reads a YAML config, applies `key.path=value` overrides (values parsed as YAML), validates. */
export function loadPretrainConfig(file: string, sets: readonly string[] = []): PretrainConfig {
  const doc = parseDocument(readFileSync(file, 'utf8'), { uniqueKeys: true });
  if (doc.errors.length > 0)
    throw new PretrainConfigError(
      file,
      doc.errors.map((e) => ({ path: '(yaml)', message: e.message.split('\n')[0] })),
    );
  const raw = (doc.toJS() ?? {}) as Record<string, unknown>;
  for (const expr of sets) {
    const eq = expr.indexOf('=');
    if (eq <= 0) throw new PretrainConfigError(file, [{ path: '(--set)', message: `"${expr}": expected key.path=value, e.g. train.max_steps=100` }]);
    setIn(raw, expr.slice(0, eq).split('.'), parse(expr.slice(eq + 1)) ?? null);
  }
  return parsePretrainConfig(raw, file);
}

function setIn(obj: Record<string, unknown>, path: string[], value: unknown): void {
  let cur = obj;
  for (const key of path.slice(0, -1)) {
    const next = cur[key];
    if (typeof next !== 'object' || next === null || Array.isArray(next)) cur[key] = {};
    cur = cur[key] as Record<string, unknown>;
  }
  cur[path[path.length - 1]] = value;
}
