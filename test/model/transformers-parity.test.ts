/**
 * Models against `transformers` itself (scripts/make_transformers_fixtures.py): checkpoints written
 * by LlamaForCausalLM / Qwen2ForCausalLM / MistralForCausalLM / GPT2LMHeadModel.save_pretrained with
 * random weights, loaded by our loader, compared on logits, next-token log-probs, the loss, every
 * parameter's gradient and greedy tokens.
 *
 * Tolerances (max |ours - HF| / max |HF| per tensor, float32 against float32): the HF reference is
 * itself off its float64 run by up to 9e-7 (logits) and 3e-6 (gradients), recorded per fixture as
 * "fp32_noise"; we measure 1.3e-6 and 2.9e-6 at most. So logits, log-probs and loss get 1e-5 and
 * gradients 2e-5: several times the float32 floor, while every tensor of these models and each bug
 * the generator injects (interleaved RoPE, ignored padding mask, positions or GELU variant for
 * GPT-2) moves the logits by more than 10x the logit tolerance ("sensitivity" in each fixture's JSON).
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { describeEachBackend } from '../helpers/backends.js';
import { greedyTokens, parityErrors } from '../helpers/parity.js';

const DIR = 'test/fixtures/transformers';
const TOL = { logits: 1e-5, logp: 1e-5, loss: 1e-5, grad: 2e-5 };

const MODELS = [
  ['llama-gqa', 'LlamaForCausalLM, GQA 4/2, untied head'],
  ['llama-tied-bias', 'LlamaForCausalLM, tied, 1 KV head, head_dim != C/H, attention and MLP biases'],
  ['qwen2', 'Qwen2ForCausalLM, q/k/v biases, tied'],
  ['mistral', 'MistralForCausalLM, GQA 4/2'],
  ['gpt2', 'GPT2LMHeadModel'],
] as const;

describeEachBackend('transformers parity', () => {
  for (const [name, what] of MODELS) {
    const fixture = `${DIR}/${name}.fixture.safetensors`;
    const modelDir = `${DIR}/${name}`;

    it(`${name} (${what}): logits, log-probs, loss and every parameter gradient`, () => {
      const e = parityErrors(fixture, modelDir, { grads: true });
      assert.ok(e.logits < TOL.logits, `logits rel. error ${e.logits.toExponential(2)}`);
      assert.ok(e.logp < TOL.logp, `log-probs rel. error ${e.logp.toExponential(2)}`);
      assert.ok(e.loss < TOL.loss, `loss rel. error ${e.loss.toExponential(2)}`);
      assert.ok(e.grads.size > 0);
      for (const [pname, err] of e.grads) assert.ok(err < TOL.grad, `${pname}: gradient rel. error ${err.toExponential(2)}`);
    });

    it(`${name}: greedy decoding of a left-padded batch gives generate()'s tokens`, () => {
      const { ours, expected } = greedyTokens(fixture, modelDir);
      assert.deepEqual(ours, expected);
    });
  }
});
