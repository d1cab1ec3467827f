/**
 * The update's gradient equals the analytic policy gradient (docs/algorithms.md "The update, equation by
 * equation"),
 *   ∇θ [ −(1/G) Σ_g A_g Σ_t log πθ(c_g,t | p, c_g,<t) ],
 * computed independently here by central finite differences of plain forward passes (float64).
 */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { setBackend, setDType } from '../../src/engine/runtime.js';
import { noGrad } from '../../src/engine/tensor.js';
import type { CausalLM } from '../../src/model/transformer.js';
import { type AgentSpec, type LossSample, PolicyAgent } from '../../src/rl/agent.js';
import { agentSpec } from '../helpers/agent-spec.js';
import { prng } from '../helpers/gradcheck.js';
import { makeTinyModel } from '../helpers/tiny-model.js';

/** log π(seq[t] | seq[<t]) summed over completion positions, from raw logits. */
function seqLogprob(model: CausalLM, prompt: number[], completion: number[]): number {
  const seq = [...prompt, ...completion];
  const logits = model.forward(Int32Array.from(seq), 1, seq.length).data;
  const V = model.vocabSize;
  let s = 0;
  for (let j = 0; j < completion.length; j++) {
    const row = prompt.length - 1 + j;
    let max = -Infinity;
    for (let v = 0; v < V; v++) max = Math.max(max, logits[row * V + v]);
    let z = 0;
    for (let v = 0; v < V; v++) z += Math.exp(logits[row * V + v] - max);
    s += logits[row * V + completion[j]] - max - Math.log(z);
  }
  return s;
}

const sample: LossSample = {
  promptIds: [1],
  completions: [[2, 3], [4], [5, 6, 0]],
  advantages: [0.7, -1.2, 0.5],
  oldLogprobs: [[], [], []],
};

describe('policy-gradient update (float64, reference backend)', () => {
  let dir = '';
  before(() => {
    setBackend('reference');
    setDType('float64');
    dir = makeTinyModel({ hidden: 8, seed: 5 });
  });
  after(() => {
    setDType('float32');
    rmSync(dir, { recursive: true, force: true });
  });

  function check(over: Partial<AgentSpec>, weightOf: (g: number) => number) {
    const agent = new PolicyAgent(agentSpec(dir, over));
    const model = agent.lm.model;
    const s = { ...sample, oldLogprobs: sample.completions.map((c) => noGrad(() => perToken(model, sample.promptIds, c))) };
    agent.update([[s]]);
    const loss = () => -sample.completions.reduce((acc, c, g) => acc + sample.advantages[g] * weightOf(g) * seqLogprob(model, sample.promptIds, c), 0) / 3;
    const rand = prng(9);
    let worst = 0;
    let checked = 0;
    noGrad(() => {
      for (const p of model.params.values()) {
        for (let n = 0; n < 6; n++) {
          const i = Math.floor(rand() * p.size);
          const x0 = p.data[i];
          p.data[i] = x0 + 1e-6;
          const up = loss();
          p.data[i] = x0 - 1e-6;
          const down = loss();
          p.data[i] = x0;
          const numeric = (up - down) / 2e-6;
          worst = Math.max(worst, Math.abs((p.grad?.[i] ?? 0) - numeric) / Math.max(1e-3, Math.abs(numeric)));
          checked++;
        }
      }
    });
    assert.ok(checked > 30);
    assert.ok(worst < 1e-5, `worst relative error ${worst}`);
  }

  it('sequence sum (MAGRPO): every completion token scored, including the last (EOS)', () => check({}, () => 1));
  it('token mean aggregation divides each sequence by its length', () => check({ lossAggregation: 'token_mean' }, (g) => 1 / sample.completions[g].length));
  it('PPO clipping at the first step (ratio 1) gives the plain policy gradient', () => check({ ppoClipEps: 0.2 }, () => 1));
  it('a KL loss term against an identical reference adds no gradient', () => check({ referenceKl: { mode: 'loss', coef: 0.3 } }, () => 1));

  it("the reported loss is the mean of a minibatch's sample losses, the quantity differentiated", async () => {
    const agent = new PolicyAgent(agentSpec(dir));
    const model = agent.lm.model;
    const other: LossSample = { promptIds: [2, 1], completions: [[7], [8, 0]], advantages: [-0.4, 0.9], oldLogprobs: [[], []] };
    const lossOf = (s: LossSample) => -s.completions.reduce((acc, c, g) => acc + s.advantages[g] * seqLogprob(model, s.promptIds, c), 0) / s.completions.length;
    const expected = noGrad(() => (lossOf(sample) + lossOf(other)) / 2);
    const stats = await agent.update([[sample, other]]);
    assert.equal(stats.steps, 1);
    assert.ok(Math.abs(stats.loss - expected) < 1e-9 * Math.max(1, Math.abs(expected)), `logged ${stats.loss}, differentiated ${expected}`);
  });
});

function perToken(model: CausalLM, prompt: number[], completion: number[]): number[] {
  return completion.map((_, j) => seqLogprob(model, prompt, completion.slice(0, j + 1)) - seqLogprob(model, prompt, completion.slice(0, j)));
}
