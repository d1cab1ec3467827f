/**
 * Checkpoint directories: `checkpoints/step-<items>/` with one folder per agent (weights or LoRA
 * adapter, optimizer moments, RNG) and trainer_state.json (data position, env step, trainer RNG,
 * pending rollout buffers, logging state, config, the byte size of each run log). Written into a
 * temporary folder and renamed, then `checkpoints/latest` is replaced atomically: a crash
 * (kill -9, power cut after fsync) or a full disk mid-write leaves the previous checkpoint
 * complete and `latest` pointing at it; a folder without trainer_state.json is never loaded.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, truncateSync } from 'node:fs';
import { join } from 'node:path';
import type { RngState } from '../engine/rng.js';
import { writeFileAtomic } from '../model/atomic-write.js';
import type { AgentHandle } from './agent-pool.js';
import type { MagrpoConfig } from './config.js';
import type { IterativeState } from './iterative-preference.js';
import type { TreeNode } from './rollout.js';

export const CHECKPOINT_VERSION = 1;
const STATE_FILE = 'trainer_state.json';
const STEP_DIR = /^step-\d+$/;
/** Append-only logs of a run directory, rolled back to the checkpoint on resume. */
const LOG_FILE = /^(metrics\.jsonl|samples\.jsonl|events\.out\.tfevents\..+)$/;

export interface TrainerState<Sample> {
  version: number;
  epoch: number;
  /** Next item index within the epoch. */
  index: number;
  /** Training items processed so far, over all epochs. */
  items: number;
  envStep: number;
  rng: RngState;
  buffers: Sample[][];
  lastLogged: number | null;
  config: MagrpoConfig;
  /**
   * Bytes of each run log (metrics.jsonl, samples.jsonl, TensorBoard events) when the checkpoint
   * was taken; a resume cuts them back so replayed steps are not logged twice.
   */
  logs: Record<string, number>;
  /** uniform_item_skip_epochs: [item index, epoch its tree was last uniform]. */
  uniformItems: [number, number][];
  /** drop_uniform_groups: samples kept out of the buffers and not logged yet. */
  unbuffered: Sample[];
  /** Items skipped since the last log entry. */
  skipped: number;
  /** Iterative runs (rl/iterative.ts): iterations done, every iteration's pairs, the drift probe; absent otherwise. */
  iterative?: IterativeState;
  /**
   * Trees of the sampling window already sampled and scored but not trained on: [item index in
   * this epoch, tree]. Absent when none is (a checkpoint between windows, or an older magrpo's).
   */
  ahead?: [number, TreeNode][];
}

/** Every field of trainer_state.json: a resume restores each one, so a state without one cannot resume exactly. */
const STATE_FIELDS = Object.keys({
  version: 0,
  epoch: 0,
  index: 0,
  items: 0,
  envStep: 0,
  rng: 0,
  buffers: 0,
  lastLogged: 0,
  config: 0,
  logs: 0,
  uniformItems: 0,
  unbuffered: 0,
  skipped: 0,
} satisfies Record<Exclude<keyof TrainerState<unknown>, 'iterative' | 'ahead'>, 0>);

/** A checkpoint that could not be written or read; names the folder and says what survives. */
export class CheckpointWriteError extends Error {
  override readonly name = 'CheckpointWriteError';
  readonly code = 'CHECKPOINT_FAILED';
  constructor(
    readonly path: string,
    message: string,
  ) {
    super(`${path}: ${message}`);
  }
}

/** Current byte size of every run log in `root` (logs are written synchronously, so this is exact). */
export function logSizes(root: string): Record<string, number> {
  const out: Record<string, number> = {};
  if (!existsSync(root)) return out;
  for (const f of readdirSync(root).sort()) if (LOG_FILE.test(f)) out[f] = statSync(join(root, f)).size;
  return out;
}

/**
 * Cuts the run logs back to their size at a checkpoint: entries written after it (which the
 * resumed run writes again) and torn last lines go. `removeNewer` also deletes logs the checkpoint
 * did not know (e.g. a TensorBoard file opened by a later, killed session); only pass it before
 * this session opened its own logs.
 */
export function rollbackLogs(root: string, logs: Record<string, number>, opts: { removeNewer?: boolean } = {}): string[] {
  if (!existsSync(root)) return [];
  const changed: string[] = [];
  for (const f of readdirSync(root)) {
    if (!LOG_FILE.test(f)) continue;
    const file = join(root, f);
    const size = statSync(file).size;
    const keep = logs[f];
    if (keep === undefined) {
      if (opts.removeNewer) {
        rmSync(file, { force: true });
        changed.push(f);
      }
    } else if (size > keep) {
      truncateSync(file, keep);
      changed.push(f);
    }
  }
  return changed;
}

/** Writes a checkpoint of `state`; the log sizes are taken here, after every entry before it is written. */
export async function saveCheckpoint<S>(root: string, state: Omit<TrainerState<S>, 'logs'>, agents: AgentHandle[], keep: number | null): Promise<string> {
  const dir = join(root, 'checkpoints');
  mkdirSync(dir, { recursive: true });
  removeStaleTemps(dir);
  const name = `step-${String(state.items).padStart(6, '0')}`;
  const tmp = join(dir, `${name}.tmp-${process.pid}`);
  const final = join(dir, name);
  const previous = latestName(dir);
  try {
    mkdirSync(tmp, { recursive: true });
    await Promise.all(agents.map((a) => a.save(join(tmp, `agent_${a.index}`))));
    writeFileAtomic(join(tmp, STATE_FILE), [JSON.stringify({ ...state, logs: logSizes(root) })]);
    if (existsSync(final)) {
      // Same step saved again (e.g. stop right after a periodic save): move the old one aside first,
      // so a crash in between leaves one complete copy (resolveCheckpoint skips incomplete folders).
      const old = `${final}.old-${process.pid}`;
      renameSync(final, old);
      renameSync(tmp, final);
      rmSync(old, { recursive: true, force: true });
    } else renameSync(tmp, final);
    writeFileAtomic(join(dir, 'latest'), [`${name}\n`]);
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true });
    const e = err as NodeJS.ErrnoException;
    const why = e.code === 'ENOSPC' ? 'the disk is full' : e.code === 'EDQUOT' ? 'the disk quota is exceeded' : e.message;
    const kept = previous ? `the previous checkpoint ${join(dir, previous)} is intact; resume from it` : 'no earlier checkpoint exists';
    throw new CheckpointWriteError(final, `checkpoint not written: ${why} (${e.code ?? e.name}); ${kept} after freeing space`);
  }
  if (keep !== null) {
    const all = readdirSync(dir)
      .filter((d) => STEP_DIR.test(d))
      .sort();
    for (const old of all.slice(0, Math.max(0, all.length - keep))) if (old !== name) rmSync(join(dir, old), { recursive: true, force: true });
  }
  return final;
}

/** Leftovers of a killed writer (`*.tmp-<pid>`, `*.old-<pid>`) are never complete: remove them. */
function removeStaleTemps(dir: string): void {
  for (const d of readdirSync(dir)) if (/\.(tmp|old)-\d+$/.test(d)) rmSync(join(dir, d), { recursive: true, force: true });
}

function latestName(dir: string): string | null {
  const latest = join(dir, 'latest');
  return existsSync(latest) ? readFileSync(latest, 'utf8').trim() : null;
}

/**
 * Resolves a checkpoint folder: a `step-*` folder itself, or a run/checkpoints folder's `latest`.
 * Only complete checkpoints (with trainer_state.json) are returned: should `latest` name a folder
 * that is gone or incomplete, the newest complete `step-*` folder is used instead.
 */
export function resolveCheckpoint(path: string): string {
  if (existsSync(join(path, STATE_FILE))) return path;
  for (const base of [path, join(path, 'checkpoints')]) {
    const name = latestName(base);
    if (name === null) continue;
    if (STEP_DIR.test(name) && existsSync(join(base, name, STATE_FILE))) return join(base, name);
    const complete = readdirSync(base)
      .filter((d) => STEP_DIR.test(d) && existsSync(join(base, d, STATE_FILE)))
      .sort();
    if (complete.length > 0) return join(base, complete[complete.length - 1]);
    throw new CheckpointWriteError(join(base, 'latest'), `names "${name}", which is not a complete checkpoint, and no other complete checkpoint exists`);
  }
  throw new Error(`${path}: no checkpoint here (expected trainer_state.json or checkpoints/latest)`);
}

/** The trainer state of a checkpoint (a folder, or a run directory's latest), without loading weights. */
export function readTrainerState<S>(path: string): TrainerState<S> {
  const file = join(resolveCheckpoint(path), STATE_FILE);
  let state: TrainerState<S>;
  try {
    state = JSON.parse(readFileSync(file, 'utf8')) as TrainerState<S>;
  } catch (err) {
    throw new CheckpointWriteError(file, `unreadable (${(err as Error).message}); delete this checkpoint folder to resume from the one before`);
  }
  if (state?.version !== CHECKPOINT_VERSION) throw new Error(`${file}: checkpoint version ${state?.version}, this magrpo reads version ${CHECKPOINT_VERSION}`);
  const missing = STATE_FIELDS.filter((k) => !(k in state));
  if (missing.length > 0)
    throw new CheckpointWriteError(
      file,
      `has no ${missing.join(', ')}: an earlier magrpo wrote it, and it cannot be resumed exactly; start a new run (agent_<i>/ holds each agent's weights)`,
    );
  return state;
}

export async function loadCheckpoint<S>(path: string, agents: AgentHandle[]): Promise<TrainerState<S>> {
  const dir = resolveCheckpoint(path);
  const state = readTrainerState<S>(dir);
  await Promise.all(agents.map((a) => a.load(join(dir, `agent_${a.index}`))));
  return state;
}
