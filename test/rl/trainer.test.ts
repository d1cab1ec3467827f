/** The MAGRPO trainer end to end on tiny word-level models (native backend). */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setBackend } from '../../src/engine/runtime.js';
import type { MagrpoConfigInput } from '../../src/rl/config.js';
import { MemorySink } from '../../src/rl/metrics.js';
import type { TreeNode } from '../../src/rl/rollout.js';
import { LocalSampler } from '../../src/rl/sampler.js';
import { setItemWindow } from '../../src/rl/sampling-window.js';
import type { Task } from '../../src/rl/task.js';
import { MAGRPOTrainer } from '../../src/rl/trainer.js';
import { makeTinyModel } from '../helpers/tiny-model.js';
import { agentWeights, assertResumedSame, goItems, type Item, ONE_TOKEN, sameWord as sameWordTask } from '../helpers/tiny-run.js';

const items = goItems;
const tmp = () => mkdtempSync(join(tmpdir(), 'magrpo-run-'));
const weights = agentWeights;
const changed = (a: Map<string, Float32Array>, b: Map<string, Float32Array>) => [...a].some(([k, v]) => v.some((x, j) => x !== b.get(k)?.[j]));
const base: MagrpoConfigInput = {
  ...ONE_TOKEN,
  early_termination_threshold: null,
};

/** Coordination game: the team scores 1 when both agents say the same (non-empty) word. */
const sameWord: Task<Item> = sameWordTask(48);

let dir = '';
let dir2 = '';
before(() => {
  setBackend('native');
  dir = makeTinyModel({ seed: 1 });
  dir2 = makeTinyModel({ arch: 'gpt2', hidden: 24, layers: 2, seed: 2 });
});
after(() => {
  rmSync(dir, { recursive: true, force: true });
  rmSync(dir2, { recursive: true, force: true });
});

describe('rollout tree accounting (docs/algorithms.md "The rollout tree, returns and buffers")', () => {
  it('aligned, N = 3, T = 3, G = 2: env steps Σ G^(t+1) = 14 per item, every node expanded', async () => {
    const task: Task<Item> = { dataset: items(2), reward: ({ turn }) => turn, transition: ({ completions }) => completions.map((c) => `go ${c}`) };
    const t = new MAGRPOTrainer({ task, model: dir, config: { ...base, num_agents: 3, num_turns: 3, num_generations: 2, num_train_epochs: 1 } });
    const root = await t.trainStep(task.dataset[0]);
    assert.equal(t.envStep, 14);
    const count = (n: TreeNode): number => 1 + n.children.reduce((s, c) => s + (c ? count(c) : 0), 0);
    assert.equal(count(root), 1 + 2 + 4);
    // returns: R = r + mean(child R) with rewards = turn index: leaf 2, middle 1 + 2, root 0 + 3
    assert.deepEqual(root.returns, [3, 3]);
    assert.equal(t.nodeSamples(root).length, 7 * 3);
    await t.close();
  });

  it('cross, N = 2, T = 2, G = 2: G^N joint actions per node, env steps 4 + 16', async () => {
    const task: Task<Item> = { dataset: items(1), reward: () => 0.5, transition: ({ completions }) => completions.map((c) => `go ${c}`) };
    const t = new MAGRPOTrainer({ task, model: dir, config: { ...base, num_turns: 2, num_generations: 2, joint_mode: 'cross', num_train_epochs: 1 } });
    const root = await t.trainStep(task.dataset[0]);
    assert.equal(root.joint.length, 4);
    assert.equal(root.children.length, 4);
    assert.equal(t.envStep, 20);
    await t.close();
  });

  it('early termination: a node whose mean reward exceeds the threshold is not expanded', async () => {
    const task: Task<Item> = { dataset: items(1), reward: () => -0.1, transition: ({ completions }) => completions.map((c) => `go ${c}`) };
    const t = new MAGRPOTrainer({ task, model: dir, config: { ...base, num_turns: 2, num_generations: 4, early_termination_threshold: -0.2 } });
    const root = await t.trainStep(task.dataset[0]);
    assert.ok(root.children.every((c) => c === null));
    assert.equal(t.envStep, 4);
    await t.close();
  });

  it('reference KL: the frozen reference equals the initial policy, so KL ≈ 0 at the start', async () => {
    const t = new MAGRPOTrainer({ task: sameWord, model: dir, config: { ...base, max_new_tokens: 3, reference_kl_enabled: true, reference_kl_coef: 0.5 } });
    const root = await t.trainStep(sameWord.dataset[0]);
    for (const g of root.groups) for (const kl of g.refKl ?? [Number.NaN]) assert.ok(kl >= 0 && kl < 1e-4, `KL ${kl}`);
    await t.close();
  });
});

describe('learning (synthetic cooperative task)', () => {
  it('two agents learn to coordinate on one word: mean joint reward rises far above chance', async () => {
    const sink = new MemorySink();
    const t = new MAGRPOTrainer({
      task: sameWord,
      model: dir,
      sinks: [sink],
      config: { ...base, num_generations: 8, agent_learning_rate: 0.03, num_train_epochs: 1, rollout_buffer_size: 1 },
    });
    await t.train();
    const r = sink.series('turn_1/reward_mean').map((p) => p.value);
    const first = r.slice(0, 8).reduce((a, b) => a + b, 0) / 8;
    const last = r.slice(-8).reduce((a, b) => a + b, 0) / 8;
    assert.ok(first < 0.35, `untrained level ${first}`);
    assert.ok(last > 0.8, `trained level ${last} (from ${first})`);
    await t.close();
  });

  it('N = 1 is GRPO through the same code: one agent learns to say "c"', async () => {
    const task: Task<Item> = { dataset: items(32), reward: ({ completions }) => (completions[0] === 'c' ? 1 : 0) };
    const sink = new MemorySink();
    const t = new MAGRPOTrainer({
      task,
      model: dir,
      sinks: [sink],
      config: { ...base, num_agents: 1, num_generations: 8, agent_learning_rate: 0.03, num_train_epochs: 1, rollout_buffer_size: 1 },
    });
    await t.train();
    const r = sink.series('turn_1/reward_mean').map((p) => p.value);
    assert.ok(r.slice(-6).reduce((a, b) => a + b, 0) / 6 > 0.8, `trained level ${r.slice(-6)}`);
    await t.close();
  });
});

describe('groups without signal (drop_uniform_groups, uniform_item_skip_epochs)', () => {
  // AdamW's weight decay moves the weights at every optimizer step, even at zero gradient: an
  // unchanged model proves no step was taken.
  const constant: Task<Item> = { dataset: items(6), reward: () => 1 };
  const config: MagrpoConfigInput = { ...base, num_generations: 3, agent_learning_rate: 0.01, weight_decay: 0.1, rollout_buffer_size: 2, num_train_epochs: 1 };

  it('drop_uniform_groups: equal rewards take no optimizer step, and their rewards are still logged', async () => {
    for (const drop of [false, true]) {
      const sink = new MemorySink();
      const t = new MAGRPOTrainer({ task: constant, model: dir, config: { ...config, drop_uniform_groups: drop }, sinks: [sink] });
      const before = weights(t, 0);
      await t.train();
      assert.equal(changed(before, weights(t, 0)), !drop, drop ? 'dropped: no step' : 'kept: weight decay steps');
      const frac = sink.series('turn_1/frac_reward_zero_std');
      assert.ok(frac.length > 0 && frac.every((e) => e.value === 1), 'every group logged as uniform');
      assert.equal(sink.series('turn_1/reward_mean').length, frac.length);
      await t.close();
    }
  });

  it('frac_reward_zero_std is 0 when the rewards of every group differ', async () => {
    const sink = new MemorySink();
    let k = 0;
    const t = new MAGRPOTrainer({
      task: { dataset: items(4), reward: () => k++ },
      model: dir,
      config: { ...config, drop_uniform_groups: true },
      sinks: [sink],
    });
    const before = weights(t, 0);
    await t.train();
    assert.ok(changed(before, weights(t, 0)));
    assert.ok(sink.series('turn_1/frac_reward_zero_std').every((e) => e.value === 0));
    await t.close();
  });

  it('uniform_item_skip_epochs: an item with equal rewards sits out k epochs, then is sampled again', async () => {
    // Items 0-2 always score 1 (uniform); items 3-5 score by coordination (mixed outcomes, G = 3).
    const dataset = Array.from({ length: 6 }, (_, i) => ({ prompt: i < 3 ? 'same' : 'go' }));
    const visited: number[] = [];
    const sink = new MemorySink();
    let n = 0;
    const task: Task<Item> = {
      dataset,
      reward: ({ item, completions }) => (item.prompt === 'same' ? 1 : (n++ % 2) + (completions[0] === completions[1] ? 1 : 0)),
    };
    const t = new MAGRPOTrainer({
      task,
      model: dir,
      config: { ...config, num_train_epochs: 5, uniform_item_skip_epochs: 1 },
      sinks: [sink],
      onTree: ({ itemIndex }) => visited.push(itemIndex),
    });
    await t.train();
    // Epoch 0 sees all; the uniform items sit out epochs 1 and 3 and come back in 2 and 4.
    const all = [0, 1, 2, 3, 4, 5];
    assert.deepEqual(visited, [...all, 3, 4, 5, ...all, 3, 4, 5, ...all]);
    assert.equal(t.items, 30, 'skipped items still count as schedule positions');
    const skipped = sink.series('items/skipped_uniform').reduce((s, e) => s + e.value, 0);
    assert.equal(skipped, 6, 'three items sat out in each of epochs 1 and 3');
    await t.close();
  });
  it('uniform_item_skip_epochs survives a resume: the same items are skipped as in one run', async () => {
    const dataset = Array.from({ length: 6 }, (_, i) => ({ prompt: i < 3 ? 'same' : 'go' }));
    const task: Task<Item> = { dataset, reward: ({ item, completions }) => (item.prompt === 'same' ? 1 : completions[0] === completions[1] ? 1 : 0) };
    const cfg = { ...config, num_train_epochs: 3, uniform_item_skip_epochs: 1 };
    const [a, b] = [tmp(), tmp()];
    try {
      const full: number[] = [];
      const one = new MAGRPOTrainer({ task, model: dir, config: { ...cfg, output_dir: a }, onTree: ({ itemIndex }) => full.push(itemIndex) });
      await one.train();
      await one.close();
      const parts: number[] = [];
      const first = new MAGRPOTrainer({ task, model: dir, config: { ...cfg, output_dir: b }, onTree: ({ itemIndex }) => parts.push(itemIndex) });
      await first.train({ maxItems: 8 }); // stops in epoch 1, after the uniform items were skipped
      await first.close();
      const second = new MAGRPOTrainer({ task, model: dir, config: { ...cfg, output_dir: b }, onTree: ({ itemIndex }) => parts.push(itemIndex) });
      await second.train({ resumeFrom: b });
      await second.close();
      assert.deepEqual(parts, full);
      assert.ok(full.length < 18, 'some items were skipped');
    } finally {
      rmSync(a, { recursive: true, force: true });
      rmSync(b, { recursive: true, force: true });
    }
  });
});

describe('checkpoints and resume', () => {
  it('interrupted + resumed run gives bit-identical weights to an uninterrupted one', async () => {
    const task: Task<Item> = { ...sameWord, dataset: items(7), evalDataset: items(2) };
    const config: MagrpoConfigInput = {
      ...base,
      max_new_tokens: 2,
      num_generations: 3,
      agent_learning_rate: 0.01,
      rollout_buffer_size: 3,
      num_train_epochs: 2,
      eval_interval: 2,
      eval_num_samples: 2,
    };
    const [a, b] = [tmp(), tmp()];
    try {
      const full = new MAGRPOTrainer({ task, model: dir, config: { ...config, output_dir: a } });
      await full.train();
      const first = new MAGRPOTrainer({ task, model: dir, config: { ...config, output_dir: b } });
      await first.train({ maxItems: 5 }); // stops mid-epoch with samples pending in the buffers
      await first.close();
      const state = JSON.parse(readFileSync(join(b, 'checkpoints', 'step-000005', 'trainer_state.json'), 'utf8'));
      assert.ok(
        state.buffers.some((buf: unknown[]) => buf.length > 0),
        'the checkpoint holds pending buffer samples',
      );
      const resumed = new MAGRPOTrainer({ task, model: dir, config: { ...config, output_dir: b } });
      await resumed.train({ resumeFrom: b });
      await assertResumedSame(full, resumed);
    } finally {
      rmSync(a, { recursive: true, force: true });
      rmSync(b, { recursive: true, force: true });
    }
  });
});

describe('sampling windows (the items up to the next drain, sampled in one batch)', () => {
  const task: Task<Item> = { ...sameWord, dataset: Array.from({ length: 7 }, (_, i) => ({ prompt: `go ${'abc'[i % 3]}` })) };
  const config: MagrpoConfigInput = { ...base, max_new_tokens: 3, num_generations: 2, agent_learning_rate: 0.01, rollout_buffer_size: 3, num_train_epochs: 1 };
  /** Rows of every sampling batch of agent 0 while `f` runs (agents on their own full models sample apart). */
  const batches = async (f: () => Promise<void>): Promise<number[]> => {
    const calls: { sampler: LocalSampler; rows: number }[] = [];
    const generate = LocalSampler.prototype.generate;
    LocalSampler.prototype.generate = function (requests, params) {
      calls.push({ sampler: this, rows: requests.reduce((n, r) => n + r.n, 0) });
      return generate.call(this, requests, params);
    };
    try {
      await f();
    } finally {
      LocalSampler.prototype.generate = generate;
    }
    // Agents sample in index order, so the first sampler called is agent 0's.
    return calls.filter((c) => c.sampler === calls[0]?.sampler).map((c) => c.rows);
  };
  /** Each item's completions, in the order the trainer trains on them. */
  const completionsOf = (trees: { itemIndex: number; root: TreeNode }[]) =>
    trees.map(({ itemIndex, root }) => [itemIndex, root.groups.map((g) => g.completions.map((c) => c.text))]);

  it('rollout_buffer_size 3: three items per batch, then the drain; MAGRPO_ITEM_WINDOW=0 samples each alone', async () => {
    const run = async () => {
      const t = new MAGRPOTrainer({ task, model: dir, config });
      await t.train();
      await t.close();
    };
    assert.deepEqual(await batches(run), [6, 6, 2], 'items 0–2, 3–5, then 6 alone (the epoch ends)');
    setItemWindow(false);
    try {
      assert.deepEqual(await batches(run), [2, 2, 2, 2, 2, 2, 2]);
    } finally {
      setItemWindow(true);
    }
  });

  it('a window ends before the item whose samples could fill a buffer', async () => {
    // Two turns, G = 2, aligned: 3 nodes per item. Buffers of 3: each item fills them alone. Buffers of
    // 4: items 0 and 1 (the drain comes inside item 1, after its tree is built), then item 2 alone.
    const twoTurns: Task<Item> = { ...task, transition: ({ completions }) => completions.map((c) => `go ${c}`) };
    const rows = (buffer: number) =>
      batches(async () => {
        const t = new MAGRPOTrainer({
          task: { ...twoTurns, dataset: twoTurns.dataset.slice(0, 3) },
          model: dir,
          config: { ...config, num_turns: 2, rollout_buffer_size: buffer },
        });
        await t.train();
        await t.close();
      });
    assert.deepEqual(await rows(3), [2, 4, 2, 4, 2, 4], 'every item alone: its first turn, then its two children');
    assert.deepEqual(await rows(4), [4, 8, 2, 4]);
  });

  it('a run stopped inside a window keeps the window in its checkpoint and resumes on the same samples', async () => {
    const [a, b] = [tmp(), tmp()];
    try {
      const whole: { itemIndex: number; root: TreeNode }[] = [];
      const full = new MAGRPOTrainer({ task, model: dir, config: { ...config, output_dir: a }, onTree: (p) => whole.push(p) });
      await full.train();
      const parts: { itemIndex: number; root: TreeNode }[] = [];
      const first = new MAGRPOTrainer({ task, model: dir, config: { ...config, output_dir: b }, onTree: (p) => parts.push(p) });
      await first.train({ maxItems: 4 }); // items 3–5 were sampled together; only item 3 was trained on
      await first.close();
      const state = JSON.parse(readFileSync(join(b, 'checkpoints', 'step-000004', 'trainer_state.json'), 'utf8'));
      assert.deepEqual(
        state.ahead.map(([i]: [number]) => i),
        [4, 5],
        "the checkpoint holds the window's untrained trees",
      );
      const resumed = new MAGRPOTrainer({ task, model: dir, config: { ...config, output_dir: b }, onTree: (p) => parts.push(p) });
      const rows = await batches(() => resumed.train({ resumeFrom: b }).then(() => {}));
      assert.deepEqual(rows, [2], 'items 4 and 5 come from the checkpoint; only item 6 is sampled');
      assert.deepEqual(completionsOf(parts), completionsOf(whole));
      await assertResumedSame(full, resumed);
    } finally {
      rmSync(a, { recursive: true, force: true });
      rmSync(b, { recursive: true, force: true });
    }
  });
});

describe('teams', () => {
  it('heterogeneous agents: a Llama and a larger GPT-2 with their own tokenizers both train', async () => {
    const t = new MAGRPOTrainer({
      task: { ...sameWord, dataset: items(3) },
      models: [dir, dir2],
      config: { ...base, agent_learning_rate: [0.01, 0.02], num_train_epochs: 1 },
    });
    const before0 = weights(t, 0);
    const before1 = weights(t, 1);
    await t.train();
    assert.ok(changed(before0, weights(t, 0)));
    assert.ok(changed(before1, weights(t, 1)));
    assert.equal(before1.size > 0 && [...before1.keys()].some((k) => k.startsWith('transformer.')), true);
    await t.close();
  });

  it('mp mode (one worker per agent) matches in-process training', async () => {
    const task = { ...sameWord, dataset: items(3) };
    const config: MagrpoConfigInput = { ...base, agent_learning_rate: 0.01, num_train_epochs: 1, max_new_tokens: 2 };
    const [a, b] = [tmp(), tmp()];
    try {
      const local = new MAGRPOTrainer({ task, model: dir, config: { ...config, output_dir: a } });
      await local.train();
      const mp = new MAGRPOTrainer({ task, model: dir, config: { ...config, output_dir: b, parallel_training: 'mp' } });
      await mp.train();
      assert.equal(mp.envStep, local.envStep);
      const wa = readFileSync(join(a, 'final', 'agent_1', 'model', 'model.safetensors'));
      const wb = readFileSync(join(b, 'final', 'agent_1', 'model', 'model.safetensors'));
      assert.ok(wa.equals(wb), 'same weights from workers as in-process');
      await local.close();
      await mp.close();
    } finally {
      rmSync(a, { recursive: true, force: true });
      rmSync(b, { recursive: true, force: true });
    }
  });
});

describe('sampling', () => {
  it('stop_strings end completions before the string (and without them the string does occur)', async () => {
    const words = async (stop: string[]) => {
      const seen: string[][] = [];
      const task: Task<Item> = {
        dataset: items(4),
        reward: ({ completions }) => {
          seen.push(...completions.map((c) => c.split(/\s+/).filter(Boolean)));
          return 0;
        },
      };
      const t = new MAGRPOTrainer({ task, model: dir, config: { ...base, max_new_tokens: 6, num_generations: 4, stop_strings: stop, seed: 3 } });
      for (const item of task.dataset) await t.trainStep(item);
      await t.close();
      return seen;
    };
    const free = await words([]);
    assert.ok(free.some((ws) => ws.includes('c')));
    const stopped = await words(['c']);
    assert.equal(stopped.length, 4 * 4 * 2);
    assert.ok(stopped.every((ws) => !ws.includes('c')));
    assert.ok(stopped.some((ws) => ws.length < 6));
  });
});

describe('metrics', () => {
  it('time/update_s of an entry includes the update it reports (no lag of one logging period)', async () => {
    const sink = new MemorySink();
    const t = new MAGRPOTrainer({ task: { ...sameWord, dataset: items(3) }, model: dir, sinks: [sink], config: { ...base, rollout_buffer_size: 1 } });
    await t.trainStep(sameWord.dataset[0]);
    const update = sink.series('time/update_s');
    assert.equal(update.length, 1);
    assert.ok(update[0].value > 0, `first entry's update time is ${update[0].value}`);
    await t.close();
  });
});

describe('bad input is reported with the field that caused it', () => {
  it('reward returning NaN or throwing; transition returning the wrong count; missing transition', async () => {
    const nan = new MAGRPOTrainer({ task: { dataset: items(1), reward: () => Number.NaN }, model: dir, config: base });
    await assert.rejects(nan.trainStep({ prompt: 'go' }), /reward: returned NaN on item 0, turn 0/);
    const thrower = new MAGRPOTrainer({
      task: {
        dataset: items(1),
        reward: () => {
          throw new Error('boom');
        },
      },
      model: dir,
      config: base,
    });
    await assert.rejects(thrower.trainStep({ prompt: 'go' }), /reward: threw on item 0, turn 0: boom/);
    const badT = new MAGRPOTrainer({
      task: { dataset: items(1), reward: () => 0, transition: () => ['only one'] },
      model: dir,
      config: { ...base, num_turns: 2 },
    });
    await assert.rejects(badT.trainStep({ prompt: 'go' }), /transition: must return 2 prompt strings/);
    assert.throws(() => new MAGRPOTrainer({ task: { dataset: items(1), reward: () => 0 }, model: dir, config: { ...base, num_turns: 2 } }), /transition/);
    assert.throws(() => new MAGRPOTrainer({ task: sameWord, model: dir, models: [dir, dir2] }), /conflict/);
    assert.throws(() => new MAGRPOTrainer({ task: sameWord }), /either model/);
    assert.throws(() => new MAGRPOTrainer({ task: sameWord, model: dir, config: { temperature: -1 } }), /temperature/);
    for (const t of [nan, thrower, badT]) await t.close();
  });
});
