/**
 * Hooks into a training run, in the spirit of TRL's `TrainerCallback`: pass objects implementing
 * any subset of these methods as `callbacks` to `MAGRPOTrainer`. They are called in order, on the
 * trainer's thread, after the trainer has done the corresponding work; a callback that throws
 * stops training with its error (named), as any user code would.
 */
import type { MagrpoConfig } from './config.js';
import type { TreeNode } from './rollout.js';
import type { EvalEpisode } from './task.js';

export interface TrainerCallback<Item = unknown> {
  /** Before the first item (after a resume has restored its state). */
  onTrainBegin?(p: { config: MagrpoConfig; items: number; envStep: number }): void | Promise<void>;
  /** Each metrics entry as it is logged (training entries are throttled by `logging_steps`). */
  onLog?(p: { envStep: number; metrics: Record<string, number> }): void | Promise<void>;
  /** Each training item's scored rollout tree (prompts, completions, token ids, rewards). */
  onTree?(p: { itemIndex: number; envStep: number; root: TreeNode }): void | Promise<void>;
  /** After each training item: progress counters. */
  onStepEnd?(p: { epoch: number; index: number; items: number; totalItems: number; envStep: number }): void | Promise<void>;
  /** After each evaluation, with its metrics and episodes. */
  onEvaluate?(p: { envStep: number; metrics: Record<string, number>; episodes: EvalEpisode<Item>[] }): void | Promise<void>;
  /** After a checkpoint has been written (`dir` is the checkpoint folder). */
  onSave?(p: { dir: string; items: number; envStep: number }): void | Promise<void>;
  /** After training ends (finished, stopped early, or stopped by `requestStop()`). */
  onTrainEnd?(p: { envStep: number; items: number; eval: Record<string, number>; stoppedEarly: boolean }): void | Promise<void>;
}

type Hook = keyof TrainerCallback;

/** Calls `hook` on every callback in order; an error names the callback and the hook. */
export async function fire<Item, H extends Hook>(
  callbacks: readonly TrainerCallback<Item>[],
  hook: H,
  arg: Parameters<NonNullable<TrainerCallback<Item>[H]>>[0],
): Promise<void> {
  for (const [i, cb] of callbacks.entries()) {
    const fn = cb[hook] as ((a: typeof arg) => void | Promise<void>) | undefined;
    if (!fn) continue;
    try {
      await fn.call(cb, arg);
    } catch (e) {
      const who = cb.constructor?.name && cb.constructor.name !== 'Object' ? cb.constructor.name : `callbacks[${i}]`;
      throw new Error(`${who}.${hook} failed: ${(e as Error).message}`, { cause: e });
    }
  }
}
