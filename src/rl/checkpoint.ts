/**
 * Checkpoint directories: `checkpoints/step-<items>/` with one folder per agent (weights or LoRA
 * adapter, optimizer moments, RNG) and trainer_state.json (data position, env step, trainer RNG,
 * pending rollout buffers, logging state, config). Written into a temporary folder and renamed,
 * then `checkpoints/latest` is replaced atomically: a crash mid-write leaves the previous
 * checkpoint complete and `latest` pointing at it.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { RngState } from '../engine/rng.js';
import { writeFileAtomic } from '../model/atomic-write.js';
import type { AgentHandle } from './agent-pool.js';
import type { MagrpoConfig } from './config.js';

export const CHECKPOINT_VERSION = 1;

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
}

export async function saveCheckpoint<S>(root: string, state: TrainerState<S>, agents: AgentHandle[], keep: number | null): Promise<string> {
  const dir = join(root, 'checkpoints');
  mkdirSync(dir, { recursive: true });
  const name = `step-${String(state.items).padStart(6, '0')}`;
  const tmp = join(dir, `${name}.tmp-${process.pid}`);
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  await Promise.all(agents.map((a) => a.save(join(tmp, `agent_${a.index}`))));
  writeFileAtomic(join(tmp, 'trainer_state.json'), [JSON.stringify(state)]);
  const final = join(dir, name);
  rmSync(final, { recursive: true, force: true });
  renameSync(tmp, final);
  writeFileAtomic(join(dir, 'latest'), [`${name}\n`]);
  if (keep !== null) {
    const all = readdirSync(dir)
      .filter((d) => /^step-\d+$/.test(d))
      .sort();
    for (const old of all.slice(0, Math.max(0, all.length - keep))) if (old !== name) rmSync(join(dir, old), { recursive: true, force: true });
  }
  return final;
}

/** Resolves a checkpoint folder: a `step-*` folder itself, or a run/checkpoints folder's `latest`. */
export function resolveCheckpoint(path: string): string {
  if (existsSync(join(path, 'trainer_state.json'))) return path;
  for (const base of [path, join(path, 'checkpoints')]) {
    const latest = join(base, 'latest');
    if (existsSync(latest)) return join(base, readFileSync(latest, 'utf8').trim());
  }
  throw new Error(`${path}: no checkpoint here (expected trainer_state.json or checkpoints/latest)`);
}

export async function loadCheckpoint<S>(path: string, agents: AgentHandle[]): Promise<TrainerState<S>> {
  const dir = resolveCheckpoint(path);
  const file = join(dir, 'trainer_state.json');
  const state = JSON.parse(readFileSync(file, 'utf8')) as TrainerState<S>;
  if (state.version !== CHECKPOINT_VERSION) throw new Error(`${file}: checkpoint version ${state.version}, this magrpo reads version ${CHECKPOINT_VERSION}`);
  await Promise.all(agents.map((a) => a.load(join(dir, `agent_${a.index}`))));
  return state;
}
