/**
 * The one-call decode step (model/llama-decode.ts, taken by model/llama.ts): sampling with it gives the
 * tokens and log-probs of the layer-by-layer forward bit for bit, on both backends, with GQA,
 * q/k/v biases (Qwen2) and bf16 packs; with LoRA adapters merged into the packs, the same tokens
 * and log-probs to float rounding; it is taken inside sampling calls of 4-64 rows and not for
 * fewer rows.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { PACKED_MIN_ROWS } from '../../src/engine/packed.js';
import { Rng } from '../../src/engine/rng.js';
import { setBackend, setPrecision } from '../../src/engine/runtime.js';
import { parseModelConfig } from '../../src/model/hf-config.js';
import { setFusedDecode } from '../../src/model/llama.js';
import { decodeStepCount } from '../../src/model/llama-decode.js';
import { createModel } from '../../src/model/load.js';
import { applyLora } from '../../src/model/lora.js';
import { generate } from '../../src/model/sample.js';
import { TINY_LLAMA_CONFIG } from '../helpers/tiny-model.js';

const llama = TINY_LLAMA_CONFIG;
const qwen2 = { ...llama, model_type: 'qwen2', tie_word_embeddings: false, rope_theta: 1e6 };

function sampleBoth(hf: Record<string, unknown>, rows: number) {
  const model = createModel(parseModelConfig(hf));
  const rng = new Rng(3);
  model.initialize(rng);
  // Random biases (they start at zero), so that a bias read from the wrong place would show.
  for (const [name, p] of model.params) if (name.endsWith('.bias')) for (let i = 0; i < p.size; i++) p.data[i] = rng.normal() * 0.1;
  const prompts = Array.from({ length: rows }, (_, i) => Array.from({ length: 3 + (i % 4) }, () => Math.floor(rng.next() * 96)));
  const run = (fused: boolean) => {
    setFusedDecode(fused);
    try {
      return generate(model, prompts, { maxNewTokens: 12, temperature: 1, rng: new Rng(11) });
    } finally {
      setFusedDecode(true);
    }
  };
  return { model, prompts, fused: run(true), plain: run(false) };
}

for (const name of ['native', 'reference'] as const) {
  describe(`fused decode step (${name} backend)`, () => {
    setBackend(name);
    after(() => {
      setPrecision('fp32');
      setBackend('native');
    });
    for (const precision of ['fp32', 'bf16'] as const) {
      it(`gives the layer-by-layer tokens and log-probs bit for bit: Llama (GQA, tied) and Qwen2 (biases), ${precision}`, () => {
        setBackend(name);
        setPrecision(precision);
        for (const hf of [llama, qwen2]) {
          const { fused, plain } = sampleBoth(hf, 8);
          assert.deepEqual(fused.tokens, plain.tokens, `${hf.model_type} tokens`);
          assert.deepEqual(fused.logprobs, plain.logprobs, `${hf.model_type} log-probs`);
        }
        setPrecision('fp32');
      });
    }
  });
}

describe('fused decode step with LoRA adapters merged into its packs', () => {
  after(() => setBackend('native'));
  for (const name of ['native', 'reference'] as const) {
    it(`gives the layer-by-layer tokens, and log-probs within 1e-4 (${name} backend)`, () => {
      setBackend(name);
      const model = createModel(parseModelConfig(llama));
      const rng = new Rng(5);
      model.initialize(rng);
      applyLora(model, { r: 4, alpha: 8, targetModules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] }, new Rng(6));
      // B starts at zero (PEFT): give the adapters a real effect, large enough to change greedy tokens.
      for (const ad of model.lora.values()) for (let i = 0; i < ad.B.size; i++) ad.B.data[i] = rng.normal() * 0.5;
      const prompts = Array.from({ length: 8 }, (_, i) => Array.from({ length: 3 + (i % 4) }, () => Math.floor(rng.next() * 96)));
      const run = (fused: boolean, lora: boolean) => {
        setFusedDecode(fused);
        const saved = new Map(model.lora);
        if (!lora) model.lora.clear();
        try {
          return generate(model, prompts, { maxNewTokens: 12, temperature: 0, rng: new Rng(11) });
        } finally {
          for (const [k, v] of saved) model.lora.set(k, v);
          setFusedDecode(true);
        }
      };
      const fused = run(true, true);
      const plain = run(false, true);
      assert.deepEqual(fused.tokens, plain.tokens);
      for (const [i, row] of plain.logprobs.entries()) {
        for (const [t, lp] of row.entries()) assert.ok(Math.abs(fused.logprobs[i][t] - lp) < 1e-4, `row ${i} token ${t}: ${fused.logprobs[i][t]} vs ${lp}`);
      }
      // The adapters change what is sampled, so a fused step that dropped them would fail above.
      assert.notDeepEqual(run(true, false).tokens, fused.tokens);
    });
  }
});

describe('when the fused step runs', () => {
  after(() => setBackend('native'));

  it('inside sampling with enough rows, LoRA or not; not for fewer rows, not when turned off', () => {
    setBackend('reference');
    const count = (fn: () => void) => {
      const before = decodeStepCount.calls;
      fn();
      return decodeStepCount.calls - before;
    };
    assert.ok(count(() => sampleBoth(llama, 8)) > 0, '8 rows: fused');
    assert.ok(count(() => sampleBoth(qwen2, 8)) > 0, 'Qwen2 with biases: fused');
    assert.equal(
      count(() => sampleBoth(llama, PACKED_MIN_ROWS - 1)),
      0,
      'below the packs',
    );
    const model = createModel(parseModelConfig(llama));
    model.initialize(new Rng(1));
    applyLora(model, { r: 2, alpha: 4, targetModules: ['q_proj'] }, new Rng(2));
    const prompts = Array.from({ length: 8 }, () => [1, 2, 3]);
    assert.ok(count(() => generate(model, prompts, { maxNewTokens: 4, rng: 1 })) > 0, 'LoRA');
    const plain = createModel(parseModelConfig(llama));
    plain.initialize(new Rng(1));
    assert.ok(count(() => generate(plain, prompts, { maxNewTokens: 4, rng: 1 })) > 0);
    setFusedDecode(false);
    try {
      assert.equal(
        count(() => generate(plain, prompts, { maxNewTokens: 4, rng: 1 })),
        0,
        'turned off',
      );
    } finally {
      setFusedDecode(true);
    }
  });
});
