/**
 * A run directory, everything one `magrpo train` leaves behind:
 *
 *   runs/<run_name>/
 *     config.yaml                 the resolved config (absolute paths, every default filled in)
 *     metrics.jsonl               {"step", "time", <metric>: value, ...} per logged entry
 *     events.out.tfevents.*       the same scalars for TensorBoard
 *     samples.jsonl               recorded rollout trees (prompts, completions, their token ids and
 *                                 sampling log-probs, joint rewards)
 *     checkpoints/step-<items>/     resumable state; checkpoints/latest names the newest
 *     final/agent_<i>/            the trained agents (HF folders, or LoRA adapters)
 *     eval.json                   final evaluation: the team and the baselines on the eval split
 *     report.json, report.md      config, timings, final evaluation
 */
import { appendFileSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import type { TrainerCallback } from '../rl/callbacks.js';
import { resolveCheckpoint } from '../rl/checkpoint.js';
import type { TreeNode } from '../rl/rollout.js';
import { promptText } from '../rl/task.js';
import type { RunConfig } from './run-config.js';

export const RUN_FILES = {
  config: 'config.yaml',
  metrics: 'metrics.jsonl',
  samples: 'samples.jsonl',
  eval: 'eval.json',
  reportJson: 'report.json',
  reportMd: 'report.md',
} as const;

export class RunDirError extends Error {
  override readonly name = 'RunDirError';
  readonly code = 'BAD_RUN_DIR';
  constructor(
    readonly file: string,
    message: string,
  ) {
    super(`${file}: ${message}`);
  }
}

/** yyyymmdd-hhmmss in local time: sortable, readable run names. */
export function timestampName(d = new Date()): string {
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}${p(d.getMonth() + 1)}${p(d.getDate())}-${p(d.getHours())}${p(d.getMinutes())}${p(d.getSeconds())}`;
}

/** Creates a fresh run directory; refuses to mix two runs in one. */
export function createRunDir(config: RunConfig): string {
  const dir = join(config.output_dir, config.run_name ?? timestampName());
  if (existsSync(join(dir, RUN_FILES.metrics)) || existsSync(join(dir, 'checkpoints')))
    throw new RunDirError(dir, 'already holds a run: choose another run_name, or continue it with --resume');
  mkdirSync(dir, { recursive: true });
  return dir;
}

export function isRunDir(path: string): boolean {
  return existsSync(join(path, RUN_FILES.config)) && !path.endsWith('.yaml');
}

export function writeRunConfig(dir: string, config: RunConfig): void {
  const header = '# Resolved by magrpo: every default filled in, paths absolute. Re-run with `magrpo train <this file>`.\n';
  writeFileSync(join(dir, RUN_FILES.config), header + stringify(config, { lineWidth: 0 }));
}

/**
 * The agent folders a run produced: final/ when training finished, else the latest checkpoint.
 * Each is `{model}` (a HF folder) or `{adapter}` (LoRA on the run's base model).
 */
export function teamFolders(dir: string, numAgents: number): { model?: string; adapter?: string }[] {
  let root = join(dir, 'final');
  if (!existsSync(root)) {
    try {
      root = resolveCheckpoint(dir);
    } catch {
      throw new RunDirError(dir, 'has neither final/ nor a checkpoint: train it first (or evaluate its config for the untrained team)');
    }
  }
  return Array.from({ length: numAgents }, (_, i) => {
    const a = join(root, `agent_${i}`);
    if (existsSync(join(a, 'model'))) return { model: join(a, 'model') };
    if (existsSync(join(a, 'adapter'))) return { adapter: join(a, 'adapter') };
    throw new RunDirError(a, 'missing (expected model/ or adapter/)');
  });
}

/** One recorded node: prompts, each agent's G completions, joint actions and their scores. */
export interface SampleNode {
  turn: number;
  env_step: number;
  prompts: string[];
  completions: string[][];
  /**
   * Per agent: the prompt's token ids. With `completion_ids` this is exactly what was trained on;
   * re-tokenising the texts is not (a sampled sequence is often not the canonical encoding).
   */
  prompt_ids: number[][];
  /** Per agent, per completion: the sampled token ids (never truncated, unlike the texts). */
  completion_ids: number[][][];
  /** Per agent, per completion, per token: the sampling log-prob log π_old (rounded to 1e-6). */
  logprobs: number[][][];
  joint: number[][];
  rewards: number[];
  returns: number[];
  components: Record<string, number>[];
  children: (SampleNode | null)[];
}

export interface SampleRecord {
  item: number;
  env_step: number;
  time: number;
  tree: SampleNode;
}

/** Appends rollout trees to samples.jsonl, bounded by count, text length and nodes per tree. */
export class SamplesRecorder implements TrainerCallback {
  private recorded: number;
  static readonly MAX_NODES = 256;

  constructor(
    readonly file: string,
    private readonly opts: RunConfig['samples'],
  ) {
    this.recorded = existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean).length : 0;
  }

  onTree(p: { itemIndex: number; envStep: number; root: TreeNode }): void {
    const { every, max_records } = this.opts;
    // by item index, so a resumed run records the same items as an uninterrupted one
    if (every === 0 || p.itemIndex % every !== 0 || this.recorded >= max_records) return;
    const budget = { nodes: SamplesRecorder.MAX_NODES };
    const record: SampleRecord = { item: p.itemIndex, env_step: p.envStep, time: Date.now() / 1000, tree: this.node(p.root, budget) as SampleNode };
    appendFileSync(this.file, `${JSON.stringify(record)}\n`);
    this.recorded++;
  }

  private node(n: TreeNode, budget: { nodes: number }): SampleNode | null {
    if (budget.nodes-- <= 0) return null;
    const cut = (s: string) => (s.length > this.opts.max_chars ? `${s.slice(0, this.opts.max_chars)}…` : s);
    return {
      turn: n.turn,
      env_step: n.envStep,
      prompts: n.groups.map((g) => cut(promptText(g.prompt))),
      completions: n.groups.map((g) => g.completions.map((c) => cut(c.text))),
      prompt_ids: n.groups.map((g) => g.promptIds),
      completion_ids: n.groups.map((g) => g.completions.map((c) => c.ids)),
      logprobs: n.groups.map((g) => g.completions.map((c) => c.logprobs.map((x) => Math.round(x * 1e6) / 1e6))),
      joint: n.joint,
      rewards: n.rewards,
      returns: n.returns,
      components: n.components,
      children: n.children.map((c) => (c ? this.node(c, budget) : null)),
    };
  }
}

/** Reads a JSONL file, skipping a torn last line (a run may be writing it). */
export function readJsonl<T>(file: string): T[] {
  if (!existsSync(file)) return [];
  const out: T[] = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    try {
      out.push(JSON.parse(line) as T);
    } catch {
      // partial line being written
    }
  }
  return out;
}

export function tensorboardFiles(dir: string): string[] {
  return readdirSync(dir)
    .filter((f) => f.startsWith('events.out.tfevents.'))
    .map((f) => join(dir, f));
}
