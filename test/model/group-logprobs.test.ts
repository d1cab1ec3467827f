/**
 * A group's completions scored with gradients over one packed sequence, the prompt computed once
 * (model/logprobs.ts groupLogprobs, engine/attention.ts prefixSharedAttention), against the plain
 * batch of prompt + completion sequences (completionLogprobs): log-probs, entropies and the
 * gradient of every trainable tensor, for Llama (GQA, RoPE) and GPT-2 (learned positions), with
 * and without LoRA, with completions of unequal and empty lengths, on both backends.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { weightedSum } from '../../src/engine/ops.js';
import { Rng } from '../../src/engine/rng.js';
import { backward, noGrad, type Tensor } from '../../src/engine/tensor.js';
import { parseModelConfig } from '../../src/model/hf-config.js';
import { createModel } from '../../src/model/load.js';
import { type CompletionLogprobs, completionLogprobs, groupLogprobs } from '../../src/model/logprobs.js';
import { applyLora } from '../../src/model/lora.js';
import type { CausalLM } from '../../src/model/transformer.js';
import { describeEachBackend } from '../helpers/backends.js';

const V = 48;

function tiny(arch: 'llama' | 'gpt2', seed: number, lora: boolean): CausalLM {
  const config =
    arch === 'llama'
      ? {
          model_type: 'llama',
          vocab_size: V,
          hidden_size: 32,
          intermediate_size: 64,
          num_hidden_layers: 2,
          num_attention_heads: 4,
          num_key_value_heads: 2,
          max_position_embeddings: 128,
          tie_word_embeddings: true,
        }
      : { model_type: 'gpt2', vocab_size: V, n_embd: 32, n_head: 4, n_layer: 2, n_positions: 128 };
  const model = createModel(parseModelConfig(config));
  const rng = new Rng(seed);
  model.initialize(rng);
  noGrad(() => {
    for (const p of model.params.values()) if (p.shape.length === 2) for (let i = 0; i < p.size; i++) p.data[i] *= 10;
  });
  if (lora) {
    const targets = arch === 'llama' ? ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] : ['c_attn', 'c_proj', 'c_fc'];
    applyLora(model, { r: 4, alpha: 8, targetModules: targets }, new Rng(seed + 1));
    // PEFT starts B at zero, which would leave A's gradient zero: give it values.
    noGrad(() => {
      for (const ad of model.lora.values()) for (let i = 0; i < ad.B.size; i++) ad.B.data[i] = (rng.next() - 0.5) * 0.5;
    });
  }
  return model;
}

const tokens = (rng: Rng, n: number) => Array.from({ length: n }, () => 1 + Math.floor(rng.next() * (V - 1)));

/** Log-probs and the gradient of Σ w_t · logπ_t for every trainable tensor. */
function scoreAndGrad(model: CausalLM, run: () => CompletionLogprobs, weights: number[]): { lp: CompletionLogprobs; grads: Map<Tensor, Float64Array> } {
  const params = model.trainableParams();
  for (const p of params) p.zeroGrad();
  const lp = run();
  backward(weightedSum(lp.tokenLogprobs, weights.slice(0, lp.tokenLogprobs.size)));
  const grads = new Map(params.map((p) => [p, Float64Array.from(p.grad ?? new Float32Array(p.size))]));
  for (const p of params) p.zeroGrad();
  return { lp, grads };
}

function assertClose(actual: ArrayLike<number>, expected: ArrayLike<number>, tol: number, what: string): void {
  assert.equal(actual.length, expected.length, `${what}: length`);
  let scale = 0;
  for (let i = 0; i < expected.length; i++) scale = Math.max(scale, Math.abs(expected[i]));
  for (let i = 0; i < expected.length; i++) {
    assert.ok(Math.abs(actual[i] - expected[i]) <= tol * Math.max(1, scale), `${what}[${i}]: ${actual[i]} vs ${expected[i]}`);
  }
}

describeEachBackend('a group scored with its prompt computed once', () => {
  for (const arch of ['llama', 'gpt2'] as const) {
    for (const lora of [false, true]) {
      it(`${arch}${lora ? ' + LoRA' : ''}: log-probs, entropies and gradients equal the unshared batch`, () => {
        const model = tiny(arch, 7, lora);
        const rng = new Rng(11);
        const prompt = tokens(rng, 9);
        const completions = [tokens(rng, 5), tokens(rng, 1), [], tokens(rng, 3), tokens(rng, 5)];
        const weights = Array.from({ length: 20 }, () => rng.next() - 0.5);
        const plain = scoreAndGrad(
          model,
          () =>
            completionLogprobs(
              model,
              completions.map((c) => ({ prompt, completion: c })),
              { entropy: true },
            ),
          weights,
        );
        const shared = scoreAndGrad(model, () => groupLogprobs(model, prompt, completions, { entropy: true }), weights);
        assert.deepEqual([...shared.lp.sequenceOf], [...plain.lp.sequenceOf]);
        assert.deepEqual(shared.lp.lengths, plain.lp.lengths);
        assertClose(shared.lp.tokenLogprobs.data, plain.lp.tokenLogprobs.data, 1e-5, 'log-probs');
        assertClose(shared.lp.entropy ?? [], plain.lp.entropy ?? [], 1e-5, 'entropy');
        let nonzero = 0;
        for (const [p, g] of plain.grads) {
          assertClose(shared.grads.get(p) ?? [], g, 1e-4, `grad ${p.name ?? 'lora'}`);
          if (g.some((x) => x !== 0)) nonzero++;
        }
        // The comparison means something only if gradients reached the tensors (LoRA's A and B included).
        assert.ok(nonzero >= (lora ? model.lora.size * 2 : model.params.size - 1), `${nonzero} tensors got a gradient`);
      });
    }
  }

  it('completions that are all one token, or all empty', () => {
    const model = tiny('llama', 3, true);
    const rng = new Rng(5);
    const prompt = tokens(rng, 4);
    const ones = [tokens(rng, 1), tokens(rng, 1)];
    const plain = noGrad(() =>
      completionLogprobs(
        model,
        ones.map((c) => ({ prompt, completion: c })),
      ),
    );
    const shared = noGrad(() => groupLogprobs(model, prompt, ones));
    assertClose(shared.tokenLogprobs.data, plain.tokenLogprobs.data, 1e-5, 'log-probs');
    assert.equal(noGrad(() => groupLogprobs(model, prompt, [[], []])).tokenLogprobs.size, 0);
    assert.throws(() => groupLogprobs(model, [], [[1]]), /prompt is empty/);
    assert.throws(() => groupLogprobs(model, tokens(rng, 120), [tokens(rng, 20)]), /exceeds the model's context/);
  });
});
