/**
 * Ready-made environments by name, as config files refer to them (`env: {name: tldr}`). Each
 * entry declares its options schema here, so configs are validated (and the JSON Schema for
 * editors is generated) without loading the environment; the module itself is imported only
 * when a run needs it (coding environments pull in the Python sandbox).
 */
import { z } from 'zod';
import type { Environment } from './environment.js';

export interface EnvEntry {
  readonly name: string;
  readonly description: string;
  /** The environment's own options (`env.options` in a config file). */
  readonly options: z.ZodObject;
  /** Options that are file or folder paths (resolved against the config file's folder). */
  readonly pathOptions?: readonly string[];
  load(options: Record<string, unknown>): Promise<Environment<unknown>>;
}

/** Options of every coding environment (src/envs/coding: reward.ts, feedback.ts). */
const codingOptions = {
  num_agents: z
    .union([z.literal(1), z.literal(2)])
    .default(2)
    .describe('2: helper + main agents; 1: one model writes the entry point (GRPO)'),
  aux_penalty: z
    .enum(['fixed', 'reference', 'off'])
    .default('fixed')
    .describe('penalty when main ignores the helper: fixed, reference (as the paper code), off'),
  feedback_mode: z
    .enum(['plain', 'passed', 'level_passed', 'level_feedback', 'expert_edits'])
    .default('level_feedback')
    .describe('turn-2+ prompts (num_turns > 1): what the agents are told about their last attempt'),
  sandbox_slice: z
    .union([z.number().int(), z.literal('all')])
    .default(1)
    .describe('asserts run for feedback: N > 0 first N, N < 0 last |N|, 0 or all every one'),
  prompt_style: z
    .enum(['instruct', 'chat', 'code'])
    .default('instruct')
    .describe(
      "instruct: the paper's prompts as raw text; chat: the same as the user turn of each model's chat template (instruction-tuned models, which need one); code: code-completion prompts for base models such as models/small (single-turn)",
    ),
  original_prompt: z.boolean().default(true).describe('feedback prompts repeat the first-turn instructions'),
  previous_response: z.boolean().default(true).describe('feedback prompts repeat the previous function'),
};

function codingEnvOptions(o: Record<string, unknown>) {
  return {
    numAgents: o.num_agents as 1 | 2,
    promptStyle: o.prompt_style as 'instruct' | 'chat' | 'code',
    reward: { auxPenalty: o.aux_penalty as 'fixed' | 'reference' | 'off' },
    feedback: {
      mode: o.feedback_mode as 'plain' | 'passed' | 'level_passed' | 'level_feedback' | 'expert_edits',
      sandboxSlice: o.sandbox_slice as number | 'all',
      originalPrompt: o.original_prompt as boolean,
      previousResponse: o.previous_response as boolean,
    },
  };
}
const dataDir = z.string().min(1).optional().describe('folder with <name>.train.jsonl.gz and <name>.eval.jsonl.gz (default: the shipped data)');

const writingPromptStyle = z
  .enum(['instruct', 'chat', 'completion'])
  .default('instruct')
  .describe(
    "prompt wording: 'instruct' (the paper's, as raw text), 'chat' (the paper's as the user turn of each model's chat template: instruction-tuned models, which need one) or 'completion' (source text + the opening of the agent's paragraph, for base models)",
  );

const fluencyGuard = z
  .strictObject({
    zero_at: z.number().min(0).lt(1).default(0).describe('word validity (share of letters in real words) at and below which an agent’s factor is 0'),
    full_at: z.number().gt(0).max(1).describe('word validity at and above which an agent’s factor is 1 (linear in between)'),
    distinct_2: z
      .strictObject({ zero_at: z.number().min(0).lt(1), full_at: z.number().gt(0).max(1) })
      .refine((g) => g.full_at > g.zero_at, { message: 'full_at must be greater than zero_at', path: ['full_at'] })
      .optional()
      .describe('also scale by a ramp on distinct-2 (unique word bigrams / bigrams): repeated phrases of real words'),
    grammar: z
      .strictObject({ zero_at: z.number().min(0).lt(1), full_at: z.number().gt(0).max(1) })
      .refine((g) => g.full_at > g.zero_at, { message: 'full_at must be greater than zero_at', path: ['full_at'] })
      .optional()
      .describe('also scale by a ramp on grammar validity (share of function-word trigrams found in English prose): real words in no English order'),
    clause_length: z
      .strictObject({ zero_at: z.number().min(0), full_at: z.number().gt(0) })
      .refine((g) => g.full_at > g.zero_at, { message: 'full_at must be greater than zero_at', path: ['full_at'] })
      .optional()
      .describe('also scale by a ramp on mean words per clause (between punctuation marks): lists of fragments of real words'),
  })
  .refine((g) => g.full_at > g.zero_at, { message: 'full_at must be greater than zero_at', path: ['full_at'] })
  .nullable()
  .default(null)
  .describe(
    '(magrpo) training-reward guard against reward hacking: reward × Π_i clamp((word_validity_i − zero_at) / (full_at − zero_at), 0, 1); eval tables keep the paper reward (docs/reward-hacking.md)',
  );
const guardOption = (o: unknown) => {
  if (!o) return undefined;
  type Ramp = { zero_at: number; full_at: number };
  const g = o as { zero_at?: number; full_at: number; distinct_2?: Ramp; grammar?: Ramp; clause_length?: Ramp };
  const ramp = (r: Ramp | undefined) => (r ? { zeroAt: r.zero_at, fullAt: r.full_at } : undefined);
  return { zeroAt: g.zero_at ?? 0, fullAt: g.full_at, distinct2: ramp(g.distinct_2), grammar: ramp(g.grammar), clauseLength: ramp(g.clause_length) };
};

export const ENVIRONMENTS: readonly EnvEntry[] = [
  {
    name: 'tldr',
    description: 'TL;DR summarisation: a concise and a detailed summary of a Reddit post (2 agents, paper §5.1)',
    options: z.strictObject({ data_dir: dataDir, fluency_guard: fluencyGuard, prompt_style: writingPromptStyle }),
    pathOptions: ['data_dir'],
    load: async (o) =>
      (await import('./writing/index.js')).tldrEnvironment({
        dataDir: o.data_dir as string | undefined,
        fluencyGuard: guardOption(o.fluency_guard),
        promptStyle: o.prompt_style as 'instruct' | 'chat' | 'completion',
      }) as Environment<unknown>,
  },
  {
    name: 'arxiv',
    description: 'arXiv introductions: background and method paragraphs from an abstract (2 agents, paper §5.1)',
    pathOptions: ['data_dir'],
    options: z.strictObject({
      data_dir: dataDir,
      fluency_guard: fluencyGuard,
      prompt_style: writingPromptStyle,
      version: z.enum(['paper', 'latest']).default('paper').describe("the reward's L2 band: paper (1.0–1.3) or latest (1.3–1.6)"),
    }),
    load: async (o) =>
      (await import('./writing/index.js')).arxivEnvironment({
        dataDir: o.data_dir as string | undefined,
        fluencyGuard: guardOption(o.fluency_guard),
        promptStyle: o.prompt_style as 'instruct' | 'chat' | 'completion',
        version: o.version as 'paper' | 'latest',
      }) as Environment<unknown>,
  },
  {
    name: 'humaneval',
    description: 'HumanEval: a helper-function agent and a main-function agent write one Python solution (2 agents, paper §5.2)',
    options: z.strictObject(codingOptions),
    load: async (o) => (await import('./coding/index.js')).humanevalEnvironment(codingEnvOptions(o)) as Environment<unknown>,
  },
  {
    name: 'coop-python',
    description: 'generated helper + main Python problems in HumanEval format, small enough for tiny models (2 agents)',
    options: z.strictObject({ ...codingOptions, data_dir: dataDir }),
    pathOptions: ['data_dir'],
    load: async (o) =>
      (await import('./coding/index.js')).coopPythonEnvironment({ ...codingEnvOptions(o), dataDir: o.data_dir as string | undefined }) as Environment<unknown>,
  },
  {
    name: 'coding-jsonl',
    description: 'your own coding problems: a JSONL file of {task_id, prompt, test, entry_point} in HumanEval format',
    options: z.strictObject({
      ...codingOptions,
      file: z.string().min(1).describe('training problems, HumanEval-format JSONL (relative to the config file)'),
      eval_file: z.string().min(1).optional().describe('evaluation problems in the same format (default: none)'),
    }),
    pathOptions: ['file', 'eval_file'],
    load: async (o) =>
      (await import('./coding/index.js')).codingEnvironmentFromJsonl(o.file as string, {
        ...codingEnvOptions(o),
        evalFile: o.eval_file as string | undefined,
      }) as Environment<unknown>,
  },
];

export function envEntry(name: string): EnvEntry | undefined {
  return ENVIRONMENTS.find((e) => e.name === name);
}

export const ENV_NAMES = ENVIRONMENTS.map((e) => e.name) as [string, ...string[]];
