/**
 * The trainer's sampling windows. Between two drains the weights do not change, so the items that
 * the same weights sample can be rolled out in one batch (rollout.ts buildTrees): a decode step
 * then reads the weights once for all of them. A window ends with the item whose samples could
 * fill a buffer (every node of a full tree counted, none dropped by drop_uniform_groups), since
 * the item after it must be sampled by the weights the drain makes.
 */
import { jointActionsPerNode, treeNodeTurns } from './advantage.js';
import type { MagrpoConfig } from './config.js';

/** Most sequences one agent samples in one window (at the window's widest level). */
export const WINDOW_SEQUENCES = 64;

// MAGRPO_ITEM_WINDOW=0 samples every item alone (A/B benchmarks).
let itemWindow = process.env.MAGRPO_ITEM_WINDOW !== '0';

/** Turns sampling windows off (every item sampled alone) or on again, for comparisons and tests. */
export function setItemWindow(on: boolean): void {
  itemWindow = on;
}

/**
 * Items a window starting now may hold: the first, and those that enter the buffers before any
 * could fill (`held`: the fullest buffer's samples; `samplesPerNode`: the algorithm's samples per
 * node and agent), at most WINDOW_SEQUENCES per agent at its widest level.
 */
export function windowSize(
  c: Pick<MagrpoConfig, 'joint_mode' | 'num_agents' | 'num_generations' | 'num_turns' | 'rollout_buffer_size'>,
  held: number,
  samplesPerNode: number,
): number {
  if (!itemWindow) return 1;
  const K = jointActionsPerNode(c.joint_mode, c.num_agents, c.num_generations);
  const nodes = treeNodeTurns(K, c.num_turns).length;
  const fit = 1 + Math.max(0, Math.floor((c.rollout_buffer_size - 1 - held) / (nodes * samplesPerNode)));
  return Math.min(fit, Math.max(1, Math.floor(WINDOW_SEQUENCES / (c.num_generations * K ** (c.num_turns - 1)))));
}
