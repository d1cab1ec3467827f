/**
 * Model-level comparison with a PyTorch fixture (scripts/make_fixtures.py,
 * scripts/make_transformers_fixtures.py): the fixture holds a padded batch and the reference's
 * logits, next-token log-probs, advantage-weighted loss, each parameter's gradient of that loss and
 * greedy tokens. Errors are max |ours - ref| / max |ref| over one tensor (valid positions only).
 */
import assert from 'node:assert/strict';
import { tokenLogprobs } from '../../src/engine/nn.js';
import { scale, weightedSum } from '../../src/engine/ops.js';
import { backward } from '../../src/engine/tensor.js';
import { loadModel } from '../../src/model/load.js';
import { readSafetensors } from '../../src/model/safetensors.js';
import { generate } from '../../src/model/sample.js';

type Fixture = Map<string, { shape: number[]; data: Float32Array | Int32Array | Float64Array }>;

export interface ParityErrors {
  logits: number;
  logp: number;
  loss: number;
  /** Parameter name -> gradient error; empty when not asked for. */
  grads: Map<string, number>;
}

export function relErr(a: ArrayLike<number>, b: ArrayLike<number>, idx?: number[]): number {
  let num = 0;
  let den = 0;
  const ids = idx ?? Array.from({ length: b.length }, (_, i) => i);
  for (const i of ids) {
    num = Math.max(num, Math.abs(a[i] - b[i]));
    den = Math.max(den, Math.abs(b[i]));
  }
  return num / Math.max(den, 1e-12);
}

function readFixture(file: string) {
  const fx = readSafetensors(file) as Fixture;
  const get = (k: string) => {
    const t = fx.get(k);
    assert.ok(t, `${file} has a tensor ${k}`);
    return t;
  };
  return { fx, get };
}

/**
 * Loads `modelDir`, runs the fixture's batch forward (and, with `grads`, backward) on the current
 * backend and dtype, and returns its errors against the fixture.
 */
export function parityErrors(fixtureFile: string, modelDir: string, opts: { grads: boolean }): ParityErrors {
  const { fx, get } = readFixture(fixtureFile);
  const model = loadModel(modelDir);
  const ids = get('input_ids');
  const [B, T] = ids.shape;
  const mask = Uint8Array.from(get('attention_mask').data);
  const positions = Int32Array.from(get('position_ids').data);
  const logits = model.forward(Int32Array.from(ids.data), B, T, { positions, keyMask: mask }); // [B, T, V]
  const V = logits.shape[2];

  const validQuery = get('valid_query').data;
  const rows: number[] = [];
  for (let r = 0; r < B * T; r++) if (validQuery[r]) for (let v = 0; v < V; v++) rows.push(r * V + v);
  const logitsErr = relErr(logits.data, get('logits').data, rows);

  // next-token log-probs at valid (t, t+1) pairs, and the fixture's loss
  const valid = get('valid').data; // [B, T-1]
  const targets = new Int32Array(B * T).fill(-1);
  const weights = new Float64Array(B * T);
  const adv = get('adv').data;
  for (let b = 0; b < B; b++) {
    for (let t = 0; t < T - 1; t++) {
      if (!valid[b * (T - 1) + t]) continue;
      targets[b * T + t] = ids.data[b * T + t + 1];
      weights[b * T + t] = -adv[b] / B;
    }
  }
  const lp = tokenLogprobs(logits, targets);
  const refLogp = get('logp').data;
  const ours: number[] = [];
  const ref: number[] = [];
  for (let b = 0; b < B; b++) {
    for (let t = 0; t < T - 1; t++) {
      if (!valid[b * (T - 1) + t]) continue;
      ours.push(lp.data[b * T + t]);
      ref.push(refLogp[b * (T - 1) + t]);
    }
  }
  assert.ok(ours.length > 10, 'the batch has enough valid positions');
  const loss = weightedSum(lp, weights);
  const refLoss = get('loss').data[0];
  const errors: ParityErrors = {
    logits: logitsErr,
    logp: relErr(ours, ref),
    loss: Math.abs(loss.item() - refLoss) / Math.max(1, Math.abs(refLoss)),
    grads: new Map(),
  };
  if (!opts.grads) return errors;

  backward(scale(loss, 1));
  for (const [pname, p] of model.params) {
    const refGrad = fx.get(`grad.${pname}`);
    assert.ok(refGrad, `${fixtureFile} has a gradient for ${pname}`);
    assert.ok(p.grad, `${pname} received a gradient`);
    errors.grads.set(pname, relErr(p.grad, refGrad.data));
  }
  const refGrads = [...fx.keys()].filter((k) => k.startsWith('grad.')).length;
  assert.equal(model.params.size, refGrads, 'the model has exactly the parameters the fixture has gradients for');
  return errors;
}

/** Greedy decoding (KV cache, our own left padding) of the fixture's prompts: ours and the reference's tokens. */
export function greedyTokens(fixtureFile: string, modelDir: string): { ours: number[][]; expected: number[][] } {
  const { get } = readFixture(fixtureFile);
  const ids = get('greedy.prompt_ids');
  const mask = get('greedy.prompt_mask');
  const expected = get('greedy.new_tokens');
  const [B, T] = ids.shape;
  const N = expected.shape[1];
  const prompts = Array.from({ length: B }, (_, b) => Array.from(ids.data.subarray(b * T, (b + 1) * T)).filter((_, t) => mask.data[b * T + t] === 1));
  const out = generate(loadModel(modelDir), prompts, { maxNewTokens: N, temperature: 0 });
  return {
    ours: out.tokens.map((row) => Array.from(row)),
    expected: Array.from({ length: B }, (_, b) => Array.from(expected.data.subarray(b * N, (b + 1) * N))),
  };
}
