/**
 * Learning-rate schedules span exactly the optimizer steps a run takes: for every scheduler and
 * num_turns 1–3, the run's last optimizer step is the schedule's last step, so linear and cosine
 * decay reach their final value there (not earlier, leaving steps at learning rate 0, and not
 * later, stopping half-way down).
 */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { lrMultiplier, type ScheduleKind } from '../../src/engine/optim.js';
import { setBackend } from '../../src/engine/runtime.js';
import type { UpdateStats } from '../../src/rl/agent.js';
import type { LocalAgent } from '../../src/rl/agent-pool.js';
import type { MagrpoConfigInput } from '../../src/rl/config.js';
import type { Task } from '../../src/rl/task.js';
import { MAGRPOTrainer } from '../../src/rl/trainer.js';
import { makeTinyModel } from '../helpers/tiny-model.js';

type Item = { prompt: string };
const LR = 0.001;

let dir = '';
before(() => {
  setBackend('native');
  dir = makeTinyModel({ seed: 4 });
});
after(() => rmSync(dir, { recursive: true, force: true }));

/** Trains to the end and returns, per agent, its scheduled step count and every update's stats. */
async function run(config: MagrpoConfigInput) {
  const task: Task<Item> = {
    dataset: Array.from({ length: 3 }, () => ({ prompt: 'go' })),
    reward: ({ completions }) => (completions[0] === completions[1] ? 1 : 0),
    transition: ({ completions }) => completions.map((c) => `go ${c}`),
  };
  const t = new MAGRPOTrainer({
    task,
    model: dir,
    config: {
      max_new_tokens: 1,
      num_generations: 2,
      eval_interval: 0,
      early_termination_threshold: null,
      agent_learning_rate: LR,
      num_train_epochs: 2,
      rollout_buffer_size: 2,
      ...config,
    },
  });
  const updates: UpdateStats[][] = t.agents.map(() => []);
  for (const handle of t.agents) {
    const local = handle as LocalAgent;
    const real = local.update.bind(local);
    local.update = async (minibatches) => {
      const s = await real(minibatches);
      updates[local.index].push(s);
      return s;
    };
  }
  await t.train();
  const scheduled = t.agents.map((a) => (a as LocalAgent).agent.spec.totalSteps);
  await t.close();
  return { scheduled, updates };
}

describe('LR schedules end on the last optimizer step', () => {
  for (const kind of ['constant', 'linear', 'cosine'] as ScheduleKind[]) {
    for (const turns of [1, 2, 3]) {
      it(`${kind}, num_turns ${turns}`, async () => {
        const warmupSteps = kind === 'constant' ? 0 : 2;
        const { scheduled, updates } = await run({ lr_scheduler: kind, warmup_steps: warmupSteps, num_turns: turns });
        for (const [i, ups] of updates.entries()) {
          const taken = ups.reduce((s, u) => s + u.steps, 0);
          assert.equal(taken, scheduled[i], `agent ${i}: ${taken} optimizer steps taken, the schedule has ${scheduled[i]}`);
          // every step before the last ran at a positive rate; the last one at the schedule's final value
          for (const u of ups) assert.ok(u.lr > 0, `agent ${i}: a step ran at learning rate ${u.lr}`);
          const last = LR * lrMultiplier(scheduled[i] - 1, { kind, warmupSteps, totalSteps: scheduled[i] });
          assert.ok(Math.abs((ups.at(-1) as UpdateStats).lr - last) <= 1e-12 * LR, `agent ${i}: last lr ${ups.at(-1)?.lr}, schedule ends at ${last}`);
        }
      });
    }
  }

  it('cross joint mode, ppo_epochs 2, one-sample minibatches: still exactly the scheduled steps', async () => {
    const { scheduled, updates } = await run({
      lr_scheduler: 'linear',
      num_turns: 2,
      joint_mode: 'cross',
      ppo_epochs: 2,
      ppo_clip_eps: 0.2,
      train_batch_size: 1,
      rollout_buffer_size: 4,
      num_train_epochs: 1,
    });
    for (const [i, ups] of updates.entries()) {
      assert.equal(
        ups.reduce((s, u) => s + u.steps, 0),
        scheduled[i],
      );
      assert.ok(ups.every((u) => u.lr > 0));
    }
  });
});
