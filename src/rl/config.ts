/**
 * The MAGRPO trainer configuration: every key declared once, with type, default, range and a
 * one-line description (docs, `--help` and the JSON Schema are generated from this schema).
 * Keys and defaults follow the reference library's MAGRPOConfig (comlrl/trainers/reinforce/magrpo.py); our additions and
 * deliberate differences are marked "(magrpo)" and listed in docs/differences.md. Keys one algorithm
 * owns are declared in its module (rl/algorithms/) and merged in flat; `algorithm` picks the one.
 */
import { isDeepStrictEqual } from 'node:util';
import { z } from 'zod';
import { type JointMode, jointActionsPerNode } from './advantage.js';
import { ALGORITHM_NAMES, ALGORITHM_OPTIONS, ALGORITHMS, algorithmNamed, ownersOf } from './algorithms/index.js';
import { MAX_PPO_EPOCHS } from './algorithms/magrpo.js';
import { IterativeSchema, iterativeProblems } from './iterative-preference.js';
import { applyTrlNames, type TrlConfigNames, type TrlRewrite, trlNote, withTrlNames } from './trl-names.js';

/** Metric destinations of `report_to`. */
export const REPORT_TARGETS = ['jsonl', 'tensorboard', 'csv'] as const;
export type ReportTarget = (typeof REPORT_TARGETS)[number];

const posInt = () => z.number().int().min(1);
const nonNegInt = () => z.number().int().min(0);

/**
 * Upper bounds on keys that size allocations (sampling batches, KV caches, rollout trees, loaded
 * agents): far above any sensible run, low enough that a typo such as `num_generations: 1e9` is a
 * config error instead of an out-of-memory crash minutes later.
 */
export const CONFIG_LIMITS = {
  agents: 64,
  generations: 4096,
  turns: 64,
  newTokens: 1 << 17,
  buffer: 1 << 16,
  ppoEpochs: MAX_PPO_EPOCHS,
  loraRank: 4096,
  /** Joint actions of one item's rollout tree, Σ_t K^t (K = G aligned, G^N cross). */
  treeActions: 1 << 20,
} as const;

export const LoraSchema = z.strictObject({
  r: posInt().max(CONFIG_LIMITS.loraRank).describe('LoRA rank'),
  alpha: z.number().positive().describe('LoRA scale numerator (update × alpha / r)'),
  target_modules: z.array(z.string()).min(1).describe('projection names that get adapters, e.g. [q_proj, v_proj] or [c_attn]'),
});

export const RewardProcessorSchema = z.strictObject({
  scale: z.number().default(1).describe('multiply the raw reward'),
  shift: z.number().default(0).describe('then add this'),
  clamp_min: z.number().nullable().default(null).describe('then clamp from below (null = no clamp)'),
  clamp_max: z.number().nullable().default(null).describe('then clamp from above (null = no clamp)'),
});

/** Where rollouts are sampled (docs/scale.md): in-process, or on OpenAI-compatible inference servers. */
export const RolloutSchema = z.strictObject({
  backend: z
    .enum(['local', 'openai'])
    .default('local')
    .describe('local: each agent samples with its own model in-process; openai: POST /v1/completions to rollout.servers (vLLM dialect; needs lora)'),
  servers: z
    .array(z.string().regex(/^https?:\/\/[^\s/]+/, 'a base URL such as http://127.0.0.1:8000'))
    .default([])
    .describe('base URLs of the OpenAI-compatible servers (http://host:port, without /v1); requests are balanced over them'),
  api_key_env: z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable name')
    .nullable()
    .default(null)
    .describe('name of the environment variable holding the servers\' API key, sent as "Authorization: Bearer" (null = no key)'),
  timeout_s: z.number().positive().default(600).describe('seconds one request may take, answer included, before it is retried'),
  max_concurrency: posInt().max(4096).default(16).describe('requests each agent keeps in flight over all servers'),
  max_retries: nonNegInt().max(100).default(4).describe('further attempts after a connection error, timeout, 408, 429 or 5xx answer'),
  backoff_s: z.number().min(0).default(0.5).describe('wait before the first retry; doubles per retry (±20 % jitter)'),
  max_backoff_s: z.number().min(0).default(30).describe('upper bound of the wait between retries'),
  max_failures: posInt().default(3).describe('failures in a row after which a server is taken out of the pool (the run goes on while one is left)'),
  max_response_mb: z.number().positive().default(64).describe('answers larger than this many MiB are refused'),
  balance: z
    .enum(['least_busy', 'round_robin'])
    .default('least_busy')
    .describe('server choice per request: fewest requests in flight (ties in turn), or strictly in turn'),
  prompt_format: z
    .enum(['token_ids', 'text'])
    .default('token_ids')
    .describe("send prompts as the agent's token ids (exact) or as text (for servers that take no token prompts)"),
  adapter_dir: z
    .string()
    .min(1)
    .nullable()
    .default(null)
    .describe(
      'folder the servers can read (same path) where each adapter version is written (null = <output_dir>/adapters, or a temporary folder without output_dir)',
    ),
  keep_adapters: z.boolean().default(false).describe('keep every adapter version on disk (false: a version is deleted once unloaded)'),
  weight_sync: z
    .enum(['lora', 'none'])
    .default('lora')
    .describe(
      "backend openai. lora: after every update each agent's LoRA adapter is loaded on every server and requests name it (vLLM, magrpo serve; needs lora). none: the servers keep the model they were started with and requests name no model (for servers that cannot load adapters at runtime, such as llama.cpp's): every completion comes from the starting model, more off-policy as training goes on, corrected only by TIS (needs tis_cap); full fine-tuning allowed",
    ),
  extra_body: z
    .record(z.string(), z.unknown())
    .default({})
    .describe(
      'backend openai: further fields of every /v1/completions body, for server-specific sampling settings; the fields the trainer sets (temperature, top_p, top_k, stop, seed, ...) win. llama.cpp: {top_k: 0, min_p: 0, repeat_penalty: 1} turns off its own defaults (docs/scale.md)',
    ),
  seed_per_request: z
    .boolean()
    .default(false)
    .describe(
      "backend local: sample each prompt's group with its own RNG, seeded as the openai backend seeds its request (then both give the same completions token for token against magrpo serve); false: one RNG for the whole batch. The openai backend always seeds per request",
    ),
  tis_cap: z
    .number()
    .positive()
    .nullable()
    .default(2)
    .describe("C of truncated importance sampling: each token's policy-gradient term × min(exp(log π_learner − log π_sampler), C) (null = no correction)"),
});

/** Where gradients are computed (docs/learner.md): magrpo's engine in-process, or a PyTorch learner process (learner/). */
export const LearnerSchema = z.strictObject({
  backend: z
    .enum(['local', 'torch'])
    .default('local')
    .describe('local: the embedded engine in this process; torch: a PyTorch learner (learner/, DDP under torchrun) computes forward_backward and optim_step'),
  url: z
    .string()
    .regex(/^(https?:\/\/[^\s/]+|unix:\/\S+)/, 'http://host:port or unix:/path/to.sock')
    .nullable()
    .default(null)
    .describe('a running learner (python -m magrpo_learner --listen ...) to use; null = the trainer starts one itself and stops it at the end'),
  python: z
    .string()
    .min(1)
    .nullable()
    .default(null)
    .describe('Python interpreter that starts the learner (null = .cache/venv-learner/bin/python if present, else python3)'),
  command: z
    .array(z.string().min(1))
    .min(1)
    .nullable()
    .default(null)
    .describe(
      'full command that starts the learner, e.g. [torchrun, --nproc_per_node, "8", -m, magrpo_learner] (the trainer appends --listen; null = built from python and nproc)',
    ),
  nproc: posInt().max(1024).default(1).describe('learner processes (> 1: torchrun --standalone --nproc_per_node, data parallel over them)'),
  device: z.enum(['cpu', 'cuda']).default('cpu').describe('where the learner computes: cpu (gloo between processes) or cuda (one GPU per process, nccl)'),
  parallel: z
    .enum(['ddp', 'fsdp'])
    .default('ddp')
    .describe('ddp: every process holds the whole model; fsdp: parameters sharded over the processes (models too large for one GPU)'),
  dtype: z
    .enum(['float32', 'float64', 'bfloat16'])
    .default('float32')
    .describe("the learner's parameter and compute precision (float64 for parity tests, bfloat16 on GPUs)"),
  exchange_dir: z
    .string()
    .min(1)
    .nullable()
    .default(null)
    .describe(
      'folder trainer and learner both read and write under the same path (initial and current adapters, checkpoints); null = a temporary folder, fine when both run on this machine',
    ),
  timeout_s: z.number().positive().default(600).describe('seconds one learner request may take before the run stops with an error'),
  startup_timeout_s: z.number().positive().default(300).describe('seconds to wait for the learner to load its models and answer'),
  max_message_mb: z.number().positive().default(256).describe('largest request or reply, in MiB (a larger one is an error, not a crash)'),
});

export const MagrpoConfigSchema = z
  .strictObject({
    algorithm: z
      .enum(ALGORITHM_NAMES)
      .default('magrpo')
      .describe(
        '(magrpo) what the team is trained with (docs/algorithms.md): magrpo, mareinforce, marloo, maremax (the online policy-gradient family), centralized_magrpo (one joint policy for every role), madpo (offline joint DPO), iac (independent actor-critic, a value head or a separate critic per agent) or maac (actors with one shared critic over joint prompts); keys another algorithm owns are refused',
      ),
    // --- data and schedule
    num_train_epochs: posInt().default(20).describe('passes over the training set'),
    num_agents: posInt().max(CONFIG_LIMITS.agents).default(2).describe('N, agents in the team (1 = single-agent GRPO)'),
    num_generations: z
      .number()
      .int()
      .min(1)
      .max(CONFIG_LIMITS.generations)
      .default(4)
      .describe('G, completions each agent samples per tree node (a group baseline needs ≥ 2; iac, whose critic is the baseline, defaults to 1)'),
    num_turns: posInt().max(CONFIG_LIMITS.turns).default(1).describe('T, turns per episode; > 1 needs a transition. (magrpo) default 1, the reference has 2'),
    seed: nonNegInt().default(0).describe('(magrpo) seeds sampling, buffer shuffles and initialisation'),
    precision: z
      .enum(['fp32', 'bf16', 'auto'])
      .default('fp32')
      .describe(
        '(magrpo) matrix products: fp32, or bf16 inputs with fp32 accumulation for products of ≥ 16 rows and attention over ≥ 16 query rows (AMX or AVX-512 BF16 where the CPU has it, else emulated); auto: bf16 where the CPU runs it natively, else fp32. Weights, gradients and optimizer state stay fp32',
      ),
    // --- sampling
    max_new_tokens: posInt().max(CONFIG_LIMITS.newTokens).default(256).describe('generation length cap per completion'),
    stop_strings: z
      .array(z.string().min(1))
      .default([])
      .describe(
        '(magrpo) a completion also ends where one of these strings appears, cut before it (e.g. "\\n\\n\\n" after a Python function); its tokens up to there are trained',
      ),
    temperature: z.number().min(0).default(0.6).describe('sampling temperature'),
    top_p: z.number().gt(0).max(1).default(0.6).describe('nucleus sampling threshold'),
    top_k: posInt().nullable().default(50).describe('top-k sampling (null = off)'),
    // --- tree
    joint_mode: z
      .enum(['aligned', 'align', 'cross', 'crossed'])
      .default('aligned')
      .transform((v): JointMode => (v === 'cross' || v === 'crossed' ? 'cross' : 'aligned'))
      .describe("joint actions: aligned (G per node) or cross (G^N per node); the reference's spellings align and crossed are read as aligned and cross"),
    discount: z.number().min(0).max(1).default(1).describe('γ in R = r + γ · mean(child returns)'),
    early_termination_threshold: z.number().nullable().default(-0.2).describe('do not expand a node whose mean reward is > this (null = off)'),
    external_prompt_passthrough: z.boolean().default(false).describe("use the transition's prompts verbatim instead of re-formatting them"),
    // --- each algorithm's own keys (src/rl/algorithms/)
    ...ALGORITHM_OPTIONS,
    fluency_metrics: z
      .boolean()
      .default(true)
      .describe(
        "(magrpo) log fluency next to the reward: each completion's mean NLL under a frozen copy of the starting model (ref_nll; costs that copy's memory and one forward pass), and for prose tasks word validity, distinct-2 and repetition; warns when they degrade",
      ),
    reward_processor: RewardProcessorSchema.nullable().default(null).describe('scale/shift/clamp applied to every joint reward'),
    reward_model: z
      .string()
      .min(1)
      .nullable()
      .default(null)
      .describe(
        '(magrpo; CoMLRL MARLHF) folder of a joint reward model trained by `magrpo reward-model`: training rewards are its scores of each joint action instead of the task reward (reward_processor still applies); evaluation keeps the task reward; online algorithms only (null = the task reward)',
      ),
    iterative: IterativeSchema.nullable()
      .default(null)
      .describe(
        "(CoMLRL MADPOIterTrainer / MARLHFIterTrainer) iterations of fresh comparison pairs against a comparator policy, replayed: with algorithm madpo each iteration runs DPO epochs on them (iterative MADPO), with an online algorithm it retrains a reward model on them and runs the algorithm on its reward (iterative MARLHF); {} takes the reference's defaults (null = not iterative)",
      ),
    // --- optimisation
    agent_learning_rate: z
      .union([z.number().positive(), z.array(z.number().positive()).min(1)])
      .default(5e-6)
      .describe('AdamW learning rate, one for all agents or one per agent'),
    weight_decay: z.number().min(0).default(0.01).describe('AdamW decoupled weight decay (torch default)'),
    adam_betas: z
      .tuple([z.number().min(0).lt(1), z.number().min(0).lt(1)])
      .default([0.9, 0.999])
      .describe('AdamW β1, β2'),
    adam_eps: z.number().positive().default(1e-8).describe('AdamW ε'),
    max_grad_norm: z.number().positive().nullable().default(null).describe('(magrpo) clip each agent’s gradient norm (null = off, as the reference)'),
    lr_scheduler: z.enum(['constant', 'linear', 'cosine']).default('constant').describe('(magrpo) learning-rate schedule over optimizer steps'),
    warmup_steps: nonNegInt().default(0).describe('(magrpo) linear warmup steps'),
    lora: LoraSchema.nullable().default(null).describe('(magrpo) train LoRA adapters instead of full weights (null = full fine-tuning)'),
    rollout: RolloutSchema.default(RolloutSchema.parse({})).describe(
      '(magrpo) where completions are sampled: in-process (local) or on inference servers (openai); docs/scale.md',
    ),
    learner: LearnerSchema.default(LearnerSchema.parse({})).describe(
      '(magrpo) where gradients are computed: in-process (local) or a PyTorch learner (torch); docs/learner.md',
    ),
    rollout_buffer_size: posInt().max(CONFIG_LIMITS.buffer).default(2).describe('node samples per agent before an update'),
    train_batch_size: posInt().max(CONFIG_LIMITS.buffer).nullable().default(null).describe('minibatch size within an update (null = rollout_buffer_size)'),
    // --- evaluation, logging, checkpoints
    eval_interval: nonNegInt().default(16).describe('evaluate every this many training items (madpo: optimizer steps; 0 = never)'),
    eval_num_samples: nonNegInt().default(4).describe('eval items per evaluation'),
    eval_sampling: z.enum(['sampled', 'greedy']).default('sampled').describe('(magrpo) eval decoding; the reference samples'),
    eval_samples_per_item: posInt().max(CONFIG_LIMITS.generations).default(1).describe('(magrpo) episodes per eval item (pass@k needs k)'),
    logging_steps: posInt().default(50).describe('minimum env-step gap between logged training entries'),
    save_steps: nonNegInt().default(0).describe('(magrpo) checkpoint every this many training items (0 = only at the end)'),
    output_dir: z.string().nullable().default(null).describe('(magrpo) run directory for checkpoints and metrics (null = no files)'),
    save_total_limit: posInt().nullable().default(2).describe('(magrpo) checkpoints kept on disk, oldest removed first (null = keep all)'),
    report_to: z
      .union([z.enum(['none', 'all', ...REPORT_TARGETS]), z.array(z.enum(REPORT_TARGETS))])
      .default(['jsonl', 'tensorboard'])
      .transform((v) => (v === 'none' ? [] : v === 'all' ? [...REPORT_TARGETS] : typeof v === 'string' ? [v] : [...new Set(v)]))
      .describe(
        '(magrpo; TRL\'s name) where metrics go when output_dir is set: jsonl (metrics.jsonl), tensorboard (events.out.tfevents.*: scalars, sampled completions as text at each evaluation, hyperparameters), csv (metrics.csv); "all" or "none" as in TRL',
      ),
    // --- execution
    parallel_training: z.enum(['none', 'null', 'mp']).default('none').describe('none: agents in turn; mp: one worker thread per agent'),
  })
  .superRefine((c, ctx) => {
    for (const [key, field] of Object.entries(ALGORITHM_OPTIONS)) {
      const owners = ownersOf(key);
      if (!owners.includes(c.algorithm) && !isDeepStrictEqual(c[key as keyof typeof c], field.parse(undefined)))
        ctx.addIssue({ code: 'custom', path: [key], message: `a key of algorithm ${owners.join(' / ')}; this run's algorithm is ${c.algorithm}` });
    }
    const algorithm = algorithmNamed(c.algorithm);
    for (const p of algorithm.check(c)) ctx.addIssue({ code: 'custom', path: p.path, message: p.message });
    if (c.reward_model !== null && (algorithm.schedule !== 'online' || algorithm.team))
      ctx.addIssue({
        code: 'custom',
        path: ['reward_model'],
        message: `MARLHF trains an online algorithm with one model per agent on the reward model (magrpo, mareinforce, marloo, maremax, iac…), not ${c.algorithm}`,
      });
    if (c.iterative !== null) for (const p of iterativeConfigProblems(c, algorithm)) ctx.addIssue({ code: 'custom', ...p });
    if (c.num_generations < 2 && !algorithm.critic)
      ctx.addIssue({ code: 'custom', path: ['num_generations'], message: `algorithm ${c.algorithm} needs ≥ 2: its baseline compares the group's completions` });
    const K = jointActionsPerNode(c.joint_mode, c.num_agents, c.num_generations);
    let tree = 0;
    for (let t = 1; t <= c.num_turns && tree <= CONFIG_LIMITS.treeActions; t++) tree += K ** t;
    if (tree > CONFIG_LIMITS.treeActions) {
      const what = K === c.num_generations ? `G^1 + … + G^T` : `K^1 + … + K^T with K = G^N = ${K}`;
      ctx.addIssue({
        code: 'custom',
        path: ['num_generations'],
        message: `each item's rollout tree would have ${what} > ${CONFIG_LIMITS.treeActions} joint actions: lower num_generations or num_turns${K === c.num_generations ? '' : ', or use joint_mode aligned'}`,
      });
    }
    for (const key of ['agent_learning_rate', 'reference_kl_coef'] as const) {
      const v = c[key];
      if (Array.isArray(v) && v.length !== 1 && v.length !== c.num_agents)
        ctx.addIssue({ code: 'custom', path: [key], message: `${key} length (${v.length}) must be 1 or num_agents (${c.num_agents})` });
    }
    if (c.ppo_epochs > 1 && c.ppo_clip_eps === null) {
      ctx.addIssue({ code: 'custom', path: ['ppo_epochs'], message: 'ppo_epochs > 1 re-uses rollouts and needs ppo_clip_eps to keep updates on-policy' });
    }
    if (c.rollout.backend === 'openai') {
      if (c.rollout.servers.length === 0)
        ctx.addIssue({ code: 'custom', path: ['rollout', 'servers'], message: 'rollout.backend "openai" needs at least one server URL' });
      if (c.lora === null && c.rollout.weight_sync === 'lora')
        ctx.addIssue({
          code: 'custom',
          path: ['rollout', 'backend'],
          message:
            'rollout.backend "openai" needs lora (set lora: {r, alpha, target_modules}): servers hot-load each agent\'s LoRA adapter after every step; full fine-tuning (lora: null) would need a server restart per step and is not supported. Or set rollout.weight_sync: none: the servers then keep sampling from the model they were started with (fully off-policy, corrected by TIS; docs/scale.md)',
        });
      if (c.rollout.weight_sync === 'none' && c.rollout.tis_cap === null)
        ctx.addIssue({
          code: 'custom',
          path: ['rollout', 'tis_cap'],
          message:
            'rollout.weight_sync "none" samples every completion from the servers\' starting model, off-policy after the first update: it needs the TIS correction (set rollout.tis_cap, e.g. 2)',
        });
    }
  });

/**
 * Reference keys magrpo removed: each one's value when left unset there, and why it is gone. A
 * config that sets one gets the reason as its error. Run directories keep their resolved config,
 * every key listed with its value, and resume and evaluate from it: a removed key at its unset
 * value carries no setting, so it is dropped instead of failing those runs.
 */
export const REMOVED_KEYS: Readonly<Record<string, { unset: unknown; why: string }>> = {
  eval_batch_size: {
    unset: 1,
    why: 'eval_batch_size was never used: evaluation samples every eval episode of a turn in one batch per agent; remove it',
  },
  agent_devices: {
    unset: null,
    why: "agent_devices was never used: agents run on this machine's CPU (parallel_training: mp gives each agent its own worker thread); remove it",
  },
  reference_devices: {
    unset: null,
    why: 'reference_devices was never used: the frozen reference model runs on the CPU with its agent; remove it',
  },
};

/** The config as users write it (every key optional; TRL GRPOConfig names accepted, docs/trl-names.md). */
export type MagrpoConfigInput = z.input<typeof MagrpoConfigSchema> & TrlConfigNames;
/** The resolved config, every default filled in. */
export type MagrpoConfig = z.output<typeof MagrpoConfigSchema>;

/** One problem in a config: where, and what is wrong. */
export interface ConfigIssue {
  path: string;
  message: string;
}

/** A config that failed validation; every problem is reported at once, each by its key path. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  readonly code = 'INVALID_CONFIG';

  constructor(
    readonly issues: ConfigIssue[],
    readonly source = 'config',
  ) {
    super(`invalid ${source}:\n${issues.map((i) => `  ${i.path}: ${i.message}`).join('\n')}`);
  }
}

/** What an iterative run (trainer.iterative set) refuses besides the section's own problems. */
function iterativeConfigProblems(c: MagrpoConfig, algorithm: ReturnType<typeof algorithmNamed>): { path: string[]; message: string }[] {
  const out = iterativeProblems(c.iterative as NonNullable<MagrpoConfig['iterative']>);
  const no = (key: string, message: string) => out.push({ path: [key], message });
  if (c.algorithm !== 'madpo' && (algorithm.schedule !== 'online' || algorithm.team))
    no('iterative', `iterative runs are MADPO (algorithm madpo) or MARLHF (an online algorithm with one model per agent), not ${c.algorithm}`);
  if (c.num_turns !== 1) no('num_turns', 'iterative runs are single-turn (num_turns 1)');
  if (c.reward_model !== null) no('reward_model', 'iterative MARLHF trains its reward model every iteration (iterative.reward_*): leave reward_model null');
  if (c.lr_scheduler !== 'constant') no('lr_scheduler', 'an iterative run knows its optimizer steps only as pairs are drawn: use lr_scheduler constant');
  if (c.save_steps !== 0) no('save_steps', 'an iterative run checkpoints after every iteration: leave save_steps 0');
  if (c.iterative?.comparator_generation_mode === 'centralized' && c.iterative.comparator_centralized_agent_index >= c.num_agents)
    out.push({
      path: ['iterative', 'comparator_centralized_agent_index'],
      message: `${c.iterative.comparator_centralized_agent_index} is not an agent of ${c.num_agents} (0-based)`,
    });
  if (c.iterative?.comparator_policy === 'history' && c.lora !== null)
    no('lora', 'comparator_policy history samples from saved snapshots of whole models: use full fine-tuning (lora null)');
  if (c.algorithm === 'madpo')
    for (const key of ['preference_num_candidates', 'preference_pairs_per_sample', 'pair_selection'] as const)
      if (!isDeepStrictEqual(c[key], ALGORITHM_OPTIONS[key].parse(undefined))) no(key, `iterative MADPO reads iterative.${key}; remove it here`);
  return out;
}

/** Levenshtein distance, for did-you-mean suggestions on unknown keys. */
function distance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...new Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
  }
  return d[a.length][b.length];
}

/** The known key closest to `key`, by edit distance (null if there are none). */
function closest(key: string, known: readonly string[]): { key: string; distance: number } | null {
  let best: { key: string; distance: number } | null = null;
  for (const k of known) {
    const d = distance(key, k);
    if (best === null || d < best.distance) best = { key: k, distance: d };
  }
  return best;
}

export function didYouMean(key: string, known: readonly string[]): string | null {
  const best = closest(key, known);
  return best !== null && best.distance <= Math.max(2, Math.floor(key.length / 3)) ? best.key : null;
}

/**
 * The message for an unknown trainer key: a TRL GRPOConfig key magrpo has no equivalent for says
 * so (and what to use instead); anything else names the closest key (TRL names included).
 */
export function unknownTrainerKey(key: string, known: readonly string[]): string {
  if (Object.hasOwn(REMOVED_KEYS, key)) return REMOVED_KEYS[key].why;
  const note = trlNote(key);
  if (note) return `TRL's GRPOConfig key "${key}" has no magrpo equivalent: ${note} (docs/trl-names.md)`;
  const names = withTrlNames(known);
  const hint = didYouMean(key, names);
  if (hint) return `unknown key — did you mean "${hint}"?`;
  const best = closest(key, names);
  return `unknown key${best ? ` (the closest trainer key is "${best.key}")` : ''}; every key: \`magrpo schema\`, TRL names: docs/trl-names.md`;
}

/**
 * Turns zod issues into path-named messages (unknown keys get a did-you-mean, or the message of
 * `unknownKey` when it has one for that key).
 */
export function formatIssues(
  error: z.ZodError,
  knownKeys: (path: (string | number)[]) => string[],
  unknownKey?: (path: (string | number)[], key: string) => string | null,
): ConfigIssue[] {
  const out: ConfigIssue[] = [];
  for (const issue of error.issues) {
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) {
        const path = [...issue.path, key].join('.');
        const special = unknownKey?.(issue.path as (string | number)[], key);
        const hint = didYouMean(key, knownKeys(issue.path as (string | number)[]));
        out.push({ path, message: special ?? `unknown key${hint ? ` — did you mean "${hint}"?` : ''}` });
      }
      continue;
    }
    const path = issue.path.length ? issue.path.join('.') : '(root)';
    let message = issue.message;
    if (issue.code === 'invalid_value' && 'values' in issue)
      message = `got ${JSON.stringify((issue as { input?: unknown }).input)}, expected one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`;
    out.push({ path, message });
  }
  return out;
}

/** The trainer section's own keys. */
export const TRAINER_KEYS: readonly string[] = Object.keys(MagrpoConfigSchema.shape);

/**
 * A trainer section as the schema reads it: TRL names rewritten (trl-names.ts), removed keys at
 * their unset value dropped (REMOVED_KEYS).
 */
export function readTrainerSection(input: unknown): TrlRewrite {
  const trl = applyTrlNames(input, TRAINER_KEYS);
  if (trl.section === null || typeof trl.section !== 'object' || Array.isArray(trl.section)) return trl;
  const section = Object.fromEntries(
    Object.entries(trl.section).filter(([k, v]) => !(Object.hasOwn(REMOVED_KEYS, k) && isDeepStrictEqual(v, REMOVED_KEYS[k].unset))),
  );
  // The algorithm's defaults for keys the section leaves unset (an unknown name is the schema's error).
  const name = section.algorithm ?? 'magrpo';
  const preset = typeof name === 'string' && Object.hasOwn(ALGORITHMS, name) ? (algorithmNamed(name).defaults?.(section) ?? {}) : {};
  // The reference's iterative configs pass fewer epochs per iteration (MADPOIterConfig 1, MARLHFIterConfig 2).
  if (section.iterative !== undefined && section.iterative !== null) preset.num_train_epochs = name === 'madpo' ? 1 : 2;
  return { ...trl, section: { ...Object.fromEntries(Object.entries(preset).filter(([k]) => !Object.hasOwn(section, k))), ...section } };
}

/**
 * Reads a trainer section (readTrainerSection), then validates it. Problems are reported by the
 * key the user wrote: a bad `learning_rate` is reported as `learning_rate`, not as the
 * `agent_learning_rate` it became.
 */
export function checkTrainerSection(input: unknown): { config: MagrpoConfig | null; issues: ConfigIssue[]; section: unknown } {
  const trl = readTrainerSection(input ?? {});
  const issues: ConfigIssue[] = trl.issues.map((i) => ({ path: i.key, message: i.message }));
  const r = MagrpoConfigSchema.safeParse(trl.section, { reportInput: true });
  if (!r.success) {
    for (const i of formatIssues(
      r.error,
      () => [...TRAINER_KEYS],
      (path, key) => (path.length === 0 ? unknownTrainerKey(key, TRAINER_KEYS) : null),
    )) {
      const top = i.path.split('.')[0];
      const from = trl.origin[top];
      issues.push(from ? { path: [from, ...i.path.split('.').slice(1)].join('.'), message: `(as ${i.path}) ${i.message}` } : i);
    }
  }
  return { config: r.success && issues.length === 0 ? r.data : null, issues, section: trl.section };
}

/** Validates and fills defaults; throws ConfigError naming every bad key. */
export function resolveConfig(input: unknown, source = 'MAGRPO config'): MagrpoConfig {
  const { config, issues } = checkTrainerSection(input);
  if (config) return config;
  throw new ConfigError(issues, source);
}

export { perAgent } from './advantage.js';
