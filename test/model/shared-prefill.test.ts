/**
 * One prefill per distinct prompt (model/sample.ts): the G copies of a prompt share its KV cache
 * row, and sampling gives the tokens and log-probs of prefilling every copy. Checked on both
 * backends, with and without LoRA adapters (the RL path, layer by layer) and with stop tokens
 * (sequences dropping out of a batch whose rows were copied). Scoring a group's completions
 * (model/logprobs.ts groupLogprobs, without gradients) gives completionLogprobs' numbers likewise.
 */
import assert from 'node:assert/strict';
import { after, it } from 'node:test';
import { Rng } from '../../src/engine/rng.js';
import { noGrad } from '../../src/engine/tensor.js';
import { parseModelConfig } from '../../src/model/hf-config.js';
import { createModel } from '../../src/model/load.js';
import { completionLogprobs, groupLogprobs } from '../../src/model/logprobs.js';
import { applyLora } from '../../src/model/lora.js';
import { distinctPrompts, generate, type SampleOptions, type SampleResult, setSharedPrefill } from '../../src/model/sample.js';
import type { CausalLM } from '../../src/model/transformer.js';
import { describeEachBackend } from '../helpers/backends.js';

after(() => setSharedPrefill(true));

function tinyLlama(seed: number): CausalLM {
  const model = createModel(
    parseModelConfig({
      model_type: 'llama',
      vocab_size: 48,
      hidden_size: 32,
      intermediate_size: 64,
      num_hidden_layers: 2,
      num_attention_heads: 4,
      num_key_value_heads: 2,
      max_position_embeddings: 128,
      tie_word_embeddings: true,
    }),
  );
  model.initialize(new Rng(seed));
  // Larger weights than the init's 0.02: peaked distributions, so greedy and top-k paths differ from uniform.
  noGrad(() => {
    for (const p of model.params.values()) if (p.shape.length === 2) for (let i = 0; i < p.size; i++) p.data[i] *= 20;
  });
  return model;
}

const prompt = (rng: Rng, n: number) => Array.from({ length: n }, () => 1 + Math.floor(rng.next() * 47));

/** Samples with the prefill shared and not (`opts()` gives each run fresh random sources); returns both and the rows each prefill ran. */
function both(model: CausalLM, prompts: number[][], opts: () => SampleOptions): { shared: SampleResult; copies: SampleResult; rows: number[] } {
  const rows: number[] = [];
  const forward = model.forward.bind(model);
  model.forward = (ids, B, T, o) => {
    if (T > 1) rows.push(B);
    return forward(ids, B, T, o);
  };
  try {
    setSharedPrefill(false);
    const copies = generate(model, prompts, opts());
    setSharedPrefill(true);
    const shared = generate(model, prompts, opts());
    return { shared, copies, rows };
  } finally {
    setSharedPrefill(true);
    model.forward = forward;
  }
}

/**
 * Same tokens and finish reasons, log-probs within 1e-5. On the reference backend the same bits: a
 * row's products do not depend on the other rows. OpenBLAS takes other kernel paths for another
 * number of rows (as it does for any other batch), which moves log-probs by ~1e-6.
 */
function assertSame(a: SampleResult, b: SampleResult, exact: boolean): void {
  assert.deepEqual(a.tokens, b.tokens);
  assert.deepEqual(a.finishReasons, b.finishReasons);
  for (const [s, lps] of a.logprobs.entries()) {
    for (const [t, lp] of lps.entries()) assert.ok(Math.abs(lp - b.logprobs[s][t]) <= 1e-5, `sequence ${s} token ${t}: ${lp} against ${b.logprobs[s][t]}`);
  }
  if (exact) assert.deepEqual(a.logprobs, b.logprobs);
}

describeEachBackend('one prefill per distinct prompt', (backend) => {
  const exact = backend === 'reference';
  const rng = new Rng(5);
  const A = prompt(rng, 9);
  const B = prompt(rng, 4);
  const C = prompt(rng, 13);

  it('finds the distinct prompts of a batch, in order of first appearance', () => {
    const d = distinctPrompts([A, B, A, C, C, B]);
    assert.deepEqual(d.first, [0, 1, 3]);
    assert.deepEqual(Array.from(d.of), [0, 1, 0, 2, 2, 1]);
  });

  it('G copies of prompts of different lengths: one prefill row each, the same tokens and log-probs', () => {
    const model = tinyLlama(1);
    const prompts = [A, A, A, A, B, B, B, B];
    for (const opts of [
      { maxNewTokens: 12, temperature: 1, rng: 3 },
      { maxNewTokens: 12, temperature: 0.7, topK: 8, topP: 0.9, rng: 4 },
      { maxNewTokens: 12, temperature: 0 },
    ]) {
      const { shared, copies, rows } = both(model, prompts, () => opts);
      assert.deepEqual(rows, [8, 2], 'the unshared prefill runs 8 rows, the shared one 2');
      assertSame(shared, copies, exact);
    }
  });

  it('a batch where only some prompts repeat, not next to each other, with stop tokens', () => {
    const model = tinyLlama(2);
    const prompts = [A, B, A, C, C, B, [7]];
    const probe = generate(model, prompts, { maxNewTokens: 10, temperature: 1, rng: 9 });
    // Stop on tokens the sequences sample early, so rows drop out of the copied cache mid-batch.
    const stopTokenIds = [...new Set(probe.tokens.map((t) => t[2]))].slice(0, 2);
    const { shared, copies, rows } = both(model, prompts, () => ({ maxNewTokens: 10, temperature: 1, rng: 9, stopTokenIds }));
    assert.deepEqual(rows, [7, 4]);
    assert.ok(shared.finishReasons.includes('stop_token') && shared.finishReasons.includes('length'), shared.finishReasons.join());
    assertSame(shared, copies, exact);
  });

  it('with LoRA adapters on every projection (the trainer samples through them) and per-prompt random sources', () => {
    const model = tinyLlama(3);
    const targets = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'];
    applyLora(model, { r: 4, alpha: 8, targetModules: targets }, new Rng(4));
    noGrad(() => {
      const r = new Rng(6);
      for (const ad of model.lora.values()) for (let i = 0; i < ad.B.size; i++) ad.B.data[i] = r.normal() * 0.5;
    });
    const prompts = [C, C, C, A, A, A];
    // One random source per group, shared by its rows (as magrpo serve and seed_per_request sample).
    const rngsFor = () => {
      const [c, a] = [new Rng(21), new Rng(22)];
      return [c, c, c, a, a, a];
    };
    const { shared, copies, rows } = both(model, prompts, () => ({ maxNewTokens: 10, temperature: 1, rowRngs: rngsFor() }));
    assert.deepEqual(rows, [6, 2]);
    assertSame(shared, copies, exact);
  });

  it('scoring completions of one prompt: its prefill once, the log-probs of running every sequence whole', () => {
    const model = tinyLlama(4);
    const completions = [prompt(rng, 7), [], prompt(rng, 1), prompt(rng, 11), prompt(rng, 7)];
    for (const p of [C, [3]]) {
      const whole = noGrad(() =>
        completionLogprobs(
          model,
          completions.map((c) => ({ prompt: p, completion: c })),
        ),
      );
      const shared = noGrad(() => groupLogprobs(model, p, completions));
      assert.deepEqual(shared.lengths, whole.lengths);
      assert.deepEqual(Array.from(shared.sequenceOf), Array.from(whole.sequenceOf));
      const [a, b] = [Array.from(shared.tokenLogprobs.data), Array.from(whole.tokenLogprobs.data)];
      for (const [t, x] of a.entries()) assert.ok(Math.abs(x - b[t]) <= 1e-5, `token ${t}: ${x} against ${b[t]}`);
      if (exact) assert.deepEqual(a, b);
    }
    assert.equal(noGrad(() => groupLogprobs(model, A, [[], []])).tokenLogprobs.size, 0);
  });
});

it("a cache's copied rows are marked as sharing their keys, group by group, through every selection", () => {
  const model = tinyLlama(4);
  const cache = model.createCache(3, 10);
  cache.len = 6;
  for (const t of [...cache.k, ...cache.v]) for (let i = 0; i < t.size; i++) t.data[i] = Math.sin(i);
  assert.equal(cache.sharedKeys, null);
  assert.equal(cache.select([2, 0, 1]).sharedKeys, null, 'distinct rows share nothing');
  // Prompts 0 and 2 copied twice each (as the decoder admits them): each copy reads its group's first row.
  const copies = cache.select([0, 0, 2, 1, 2]);
  assert.deepEqual(copies.sharedKeys, { rows: Int32Array.of(0, 0, 2, 3, 2), len: 6 });
  copies.len = 8; // two tokens decoded: their keys are each row's own
  const left = copies.select([1, 3, 4]); // rows 0 and 2 finished
  assert.deepEqual(left.sharedKeys, null, 'one row left of each group');
  const kept = copies.select([1, 2, 4]);
  assert.deepEqual(kept.sharedKeys, { rows: Int32Array.of(0, 1, 1), len: 6 }, 'the prompt positions only, not the decoded ones');
  for (let l = 0; l < model.config.numLayers; l++) {
    const per = kept.maxLen * kept.k[l].shape[2] * kept.k[l].shape[3];
    const used = 6 * kept.k[l].shape[2] * kept.k[l].shape[3];
    assert.deepEqual(kept.k[l].data.subarray(per, per + used), kept.k[l].data.subarray(2 * per, 2 * per + used), 'the rows it names hold the same keys');
    assert.notDeepEqual(kept.k[l].data.subarray(0, used), kept.k[l].data.subarray(per, per + used), 'rows of different prompts differ');
  }
});
