/**
 * Models against PyTorch fixtures (scripts/make_fixtures.py): logits, next-token log-probs, the
 * gradient of an advantage-weighted log-prob loss w.r.t. every parameter, and greedy decoding.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { setBackend } from '../../src/engine/runtime.js';
import { describeEachBackend } from '../helpers/backends.js';
import { greedyTokens, parityErrors } from '../helpers/parity.js';

const FIX = 'test/fixtures';

function checkModel(name: string, modelDir: string, opts: { grads: boolean }) {
  it(`${modelDir.split('/').pop()}: logits, log-probs${opts.grads ? ' and every parameter gradient' : ''} match PyTorch (rel. error < 1e-4)`, () => {
    const e = parityErrors(`${FIX}/${name}.fixture.safetensors`, modelDir, opts);
    assert.ok(e.logits < 1e-4, 'logits');
    assert.ok(e.logp < 1e-4, 'log-probs');
    assert.ok(e.loss < 1e-4, 'loss');
    for (const [pname, err] of e.grads) assert.ok(err < 1e-4, `${pname}: gradient rel. error ${err.toExponential(2)}`);
  });
}

for (const [fixture, dirs, grads] of [
  ['tiny-llama', ['tiny-llama', 'tiny-llama-sharded'], true],
  ['tiny-qwen2', ['tiny-qwen2'], true],
  ['tiny-gpt2', ['tiny-gpt2', 'tiny-gpt2-noprefix'], true],
  ['tiny-llama-bf16', ['tiny-llama-bf16'], false],
  ['tiny-llama-fp16', ['tiny-llama-fp16'], false],
] as const) {
  describeEachBackend(`PyTorch parity: ${fixture}`, () => {
    for (const dir of dirs) checkModel(fixture, `${FIX}/models/${dir}`, { grads });
  });
}

describeEachBackend('PyTorch parity: greedy decoding with a KV cache', (backendName) => {
  for (const fixture of ['tiny-llama', 'tiny-qwen2', 'tiny-gpt2']) {
    it(`${fixture}: left-padded batch gives PyTorch's greedy tokens exactly`, () => {
      setBackend(backendName);
      const { ours, expected } = greedyTokens(`${FIX}/${fixture}.fixture.safetensors`, `${FIX}/models/${fixture}`);
      assert.deepEqual(ours, expected);
    });
  }
});
