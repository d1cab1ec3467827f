/**
 * Ready-made environments by name, as config files refer to them (`env: {name: tldr}`). Each
 * entry carries its options schema (declared in the environment's own options.ts), so configs are
 * validated (and the JSON Schema for editors is generated) without loading the environment; the
 * module itself is imported only when a run needs it (coding environments pull in the Python
 * sandbox).
 */
import type { z } from 'zod';
import { CodingJsonlOptionsSchema, CodingOptionsSchema, CoopPythonOptionsSchema } from './coding/options.js';
import type { Environment } from './environment.js';
import { ArxivOptionsSchema, TldrOptionsSchema } from './writing/options.js';

export interface EnvEntry {
  readonly name: string;
  readonly description: string;
  /** The environment's own options (`env.options` in a config file). */
  readonly options: z.ZodObject;
  /** Options that are file or folder paths (resolved against the config file's folder). */
  readonly pathOptions?: readonly string[];
  /** Validates the options (defaults filled in) and builds the environment. */
  load(options: unknown): Promise<Environment<unknown>>;
}

/** An entry whose loader gets its options as the schema outputs them. */
function entry<S extends z.ZodObject, Item>(e: {
  name: string;
  description: string;
  options: S;
  pathOptions?: readonly string[];
  build: (options: z.output<S>) => Promise<Environment<Item>>;
}): EnvEntry {
  const { build, ...rest } = e;
  // Item is erased here: callers give an environment only items of its own splits.
  return { ...rest, load: async (options) => (await build(e.options.parse(options ?? {}))) as Environment<unknown> };
}

export const ENVIRONMENTS: readonly EnvEntry[] = [
  entry({
    name: 'tldr',
    description: 'TL;DR summarisation: a concise and a detailed summary of a Reddit post (2 agents, paper §5.1)',
    options: TldrOptionsSchema,
    pathOptions: ['data_dir'],
    build: async (o) => (await import('./writing/index.js')).tldrEnvironment(o),
  }),
  entry({
    name: 'arxiv',
    description: 'arXiv introductions: background and method paragraphs from an abstract (2 agents, paper §5.1)',
    options: ArxivOptionsSchema,
    pathOptions: ['data_dir'],
    build: async (o) => (await import('./writing/index.js')).arxivEnvironment(o),
  }),
  entry({
    name: 'humaneval',
    description: 'HumanEval: a helper-function agent and a main-function agent write one Python solution (2 agents, paper §5.2)',
    options: CodingOptionsSchema,
    build: async (o) => (await import('./coding/index.js')).humanevalEnvironment(o),
  }),
  entry({
    name: 'coop-python',
    description: 'generated helper + main Python problems in HumanEval format, small enough for tiny models (2 agents)',
    options: CoopPythonOptionsSchema,
    pathOptions: ['data_dir'],
    build: async (o) => (await import('./coding/index.js')).coopPythonEnvironment(o),
  }),
  entry({
    name: 'coding-jsonl',
    description: 'your own coding problems: a JSONL file of {task_id, prompt, test, entry_point} in HumanEval format',
    options: CodingJsonlOptionsSchema,
    pathOptions: ['file', 'eval_file'],
    build: async ({ file, ...o }) => (await import('./coding/index.js')).codingEnvironmentFromJsonl(file, o),
  }),
];

export function envEntry(name: string): EnvEntry | undefined {
  return ENVIRONMENTS.find((e) => e.name === name);
}

export const ENV_NAMES = ENVIRONMENTS.map((e) => e.name) as [string, ...string[]];
