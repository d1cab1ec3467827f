/**
 * The joint reward model of MARLHF (src/rl/reward-model.ts) and its preference data
 * (src/rl/preference-data.ts):
 *  1. the joint text is the reference's, character for character;
 *  2. Bradley–Terry training on models/micro, float64 reference backend, against an independent
 *     PyTorch float64 implementation (scripts/reward_model_reference.py, written as CoMLRL's
 *     JointRewardModel and _train_reward_model): the same pairs in the same batches give the same
 *     loss, gradient norm and per-parameter gradients at every step, and the same weights after
 *     the last step, within 1e-9 relative;
 *  3. a trained model saved and loaded scores as before; what training taught it (the chosen
 *     responses of a consistent preference) it scores higher;
 *  4. bad input: a preference row missing a field, a folder without the head, are errors naming
 *     the field or file.
 * Part 2 needs Python with torch and transformers (`bash scripts/setup.sh --with-learner`).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setBackend, setDType } from '../../src/engine/runtime.js';
import { readPreferencePairs } from '../../src/rl/preference-data.js';
import { encodePairs, jointText, type PreferencePair, REWARD_HEAD_FILE, RewardModel, trainRewardModel } from '../../src/rl/reward-model.js';
import { skipTest } from '../helpers/skip.js';

const MODEL = join('models', 'micro');
const PY = process.env.MAGRPO_LEARNER_PYTHON ?? (existsSync('.cache/venv-learner/bin/python') ? '.cache/venv-learner/bin/python' : 'python3');

function pythonProblem(): string | null {
  const r = spawnSync(PY, ['-c', 'import torch, transformers'], { encoding: 'utf8', timeout: 600_000 });
  if (r.error) return `${PY} cannot be run (${r.error.message}); install the learner with bash scripts/setup.sh --with-learner`;
  if (r.status !== 0) return `${PY} cannot import torch and transformers (${r.stderr.trim().split('\n').pop()}); bash scripts/setup.sh --with-learner`;
  return null;
}

/** |a − b| ≤ tol · max(|b|, scale). */
function close(a: number, b: number, what: string, tol: number, scale = 0): void {
  assert.ok(Number.isFinite(a) && Number.isFinite(b), `${what}: ${a} vs ${b}`);
  assert.ok(Math.abs(a - b) <= tol * Math.max(Math.abs(b), scale, 1e-30), `${what}: magrpo ${a}, PyTorch ${b}`);
}

const PAIRS: PreferencePair[] = [
  { prompts: ['Summarise: the cat sat.', 'Add detail: the cat sat.'], chosen: ['A cat sat.', 'The cat sat on a mat.'], rejected: ['Dog', 'no'] },
  { prompts: ['Summarise: rain fell.', 'Add detail: rain fell.'], chosen: ['Rain fell.', 'Heavy rain fell all day.'], rejected: ['x', 'rain rain rain'] },
  { prompts: ['Summarise: def f(): pass', 'Test it'], chosen: ['def f():\n    return 1', 'assert f() == 1'], rejected: ['', ''] },
];

describe('reward model', () => {
  it('writes the reference joint text', () => {
    assert.equal(
      jointText(['p1', 'p2'], ['y1'], 2),
      'Joint multi-agent response\n\nAgent 1 prompt:\np1\n\nAgent 1 response:\ny1\n\nAgent 2 prompt:\np2\n\nAgent 2 response:\n',
    );
  });

  describe('against PyTorch float64', () => {
    before(() => {
      setBackend('reference');
      setDType('float64');
    });
    after(() => setDType('float32'));

    it('gives the loss, gradients and weights of the reference training loop', (t) => {
      const skip = pythonProblem();
      if (skip) return skipTest(t, 'learner', skip);
      const rm = RewardModel.create(MODEL, 2, { max_length: null, freeze_backbone: false, seed: 5 });
      const head = { weight: Array.from(rm.weight.data), bias: rm.bias.data[0] };
      const encoded = encodePairs(rm, PAIRS);
      const grads: Record<string, number[]>[] = [];
      const o = { learning_rate: 3e-3, num_train_epochs: 2, train_batch_size: 2, max_length: null, freeze_backbone: false, seed: 5 };
      const { logs } = trainRewardModel(rm, PAIRS, o, {
        beforeStep: () => grads.push(Object.fromEntries(rm.params().map((p) => [p.name as string, Array.from(p.grad ?? [])]))),
      });
      assert.equal(logs.length, 4, 'two passes of batches 2 + 1');
      const batches = logs.map((l) => l.pairs.map((k) => encoded[k]));
      const r = spawnSync(PY, ['scripts/reward_model_reference.py'], {
        input: JSON.stringify({ model: MODEL, head, lr: o.learning_rate, weight_decay: 0.01, batches }),
        encoding: 'utf8',
        maxBuffer: 1 << 28,
        timeout: 600_000,
      });
      assert.equal(r.status, 0, r.stderr);
      const ref = JSON.parse(r.stdout) as { steps: { loss: number; grad_norm: number; grads: Record<string, number[]> }[]; params: Record<string, number[]> };
      const name = (n: string) => n.replace(/^backbone\./, '');
      for (const [s, step] of ref.steps.entries()) {
        close(logs[s].loss, step.loss, `step ${s + 1} loss`, 1e-9);
        close(logs[s].gradNorm, step.grad_norm, `step ${s + 1} gradient norm`, 1e-9);
        const refGrads = Object.fromEntries(Object.entries(step.grads).map(([n, g]) => [name(n), g]));
        assert.deepEqual(Object.keys(grads[s]).sort(), Object.keys(refGrads).sort(), 'the same parameters get gradients');
        for (const [n, g] of Object.entries(refGrads)) {
          const scale = Math.max(...g.map(Math.abs));
          for (const [i, x] of g.entries()) close(grads[s][n][i], x, `step ${s + 1} ∂L/∂${n}[${i}]`, 1e-9, scale);
        }
      }
      const params = new Map([...rm.lm.model.params.entries(), ['reward_head.weight', rm.weight], ['reward_head.bias', rm.bias]]);
      for (const [n, w] of Object.entries(ref.params)) {
        const mine = params.get(name(n));
        assert.ok(mine, `no parameter ${name(n)}`);
        const scale = Math.max(...w.map(Math.abs));
        for (const [i, x] of w.entries()) close(mine.data[i], x, `${name(n)}[${i}] after 4 steps`, 1e-9, scale);
      }
    });
  });

  it('learns a consistent preference, and scores the same after save and load', () => {
    const rm = RewardModel.create(MODEL, 2, { max_length: 48, freeze_backbone: false, seed: 1 });
    const before = PAIRS.map((p) => rm.score(p.prompts, p.chosen) - rm.score(p.prompts, p.rejected));
    const { logs } = trainRewardModel(rm, PAIRS, {
      learning_rate: 3e-3,
      num_train_epochs: 8,
      train_batch_size: 3,
      max_length: 48,
      freeze_backbone: false,
      seed: 1,
    });
    assert.ok(logs.at(-1)!.loss < logs[0].loss / 2, `Bradley–Terry loss ${logs[0].loss} → ${logs.at(-1)!.loss}`);
    const margins = PAIRS.map((p) => rm.score(p.prompts, p.chosen) - rm.score(p.prompts, p.rejected));
    for (const [k, m] of margins.entries()) assert.ok(m > 0 && m > before[k], `pair ${k}: margin ${before[k]} → ${m}`);
    const dir = mkdtempSync(join(tmpdir(), 'magrpo-rm-'));
    try {
      rm.save(dir);
      const back = RewardModel.load(dir);
      assert.equal(back.numAgents, 2);
      assert.equal(back.maxLength, 48);
      for (const p of PAIRS) assert.ok(Math.abs(back.score(p.prompts, p.chosen) - rm.score(p.prompts, p.chosen)) < 1e-5);
      assert.ok(back.ids(PAIRS[0].prompts, PAIRS[0].chosen).length <= 48, 'max_length caps the joint text');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('freeze_backbone trains the head only', () => {
    const rm = RewardModel.create(MODEL, 2, { max_length: null, freeze_backbone: true, seed: 1 });
    const embed = Float64Array.from(rm.lm.model.param('model.embed_tokens.weight').data);
    const w0 = Float64Array.from(rm.weight.data);
    trainRewardModel(rm, PAIRS, { learning_rate: 1e-2, num_train_epochs: 1, train_batch_size: 1, max_length: null, freeze_backbone: true, seed: 1 });
    assert.deepEqual(Float64Array.from(rm.lm.model.param('model.embed_tokens.weight').data), embed);
    assert.notDeepEqual(Float64Array.from(rm.weight.data), w0);
  });

  it('refuses a folder without its head, naming the file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'magrpo-rm-'));
    try {
      cpSync(MODEL, dir, { recursive: true });
      assert.throws(() => RewardModel.load(dir), new RegExp(`${REWARD_HEAD_FILE}.*scalar head`));
      assert.throws(() => RewardModel.load(join(dir, 'nope')), /no such folder/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('reads preference files and names the missing field and line', () => {
    const dir = mkdtempSync(join(tmpdir(), 'magrpo-pref-'));
    try {
      const file = join(dir, 'pairs.jsonl');
      const good = { prompts: ['p', 'q'], chosen: ['a', 'b'], rejected: ['c', 'd'] };
      writeFileSync(file, `${JSON.stringify(good)}\n\n${JSON.stringify(good)}\n`);
      assert.deepEqual(readPreferencePairs(file), [good, good]);
      writeFileSync(file, `${JSON.stringify(good)}\n${JSON.stringify({ prompts: ['p', 'q'], rejected: ['c', 'd'] })}\n`);
      assert.throws(() => readPreferencePairs(file), /pairs\.jsonl:2: field "chosen" is missing/);
      writeFileSync(file, `${JSON.stringify(good)}\n${JSON.stringify({ ...good, rejected: ['c'] })}\n`);
      assert.throws(() => readPreferencePairs(file), /pairs\.jsonl:2: field "rejected" has 1 entries, earlier rows have 2 agents/);
      writeFileSync(file, `${JSON.stringify({ ...good, chosen: 'a' })}\n`);
      assert.throws(() => readPreferencePairs(file), /:1: field "chosen" must be a non-empty list of strings/);
      writeFileSync(file, '{oops\n');
      assert.throws(() => readPreferencePairs(file), /:1: not JSON/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
