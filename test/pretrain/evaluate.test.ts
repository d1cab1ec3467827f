import assert from 'node:assert/strict';
import { test } from 'node:test';
import { crossEntropy } from '../../src/engine/nn.js';
import { Rng } from '../../src/engine/rng.js';
import { backend } from '../../src/engine/runtime.js';
import { noGrad } from '../../src/engine/tensor.js';
import { parseModelConfig } from '../../src/model/hf-config.js';
import { createModel } from '../../src/model/load.js';
import { windowsAt } from '../../src/pretrain/dataset.js';
import { meanTokenNll } from '../../src/pretrain/evaluate.js';

backend().setNumThreads(1);

test('meanTokenNll is the mean cross-entropy over all window targets, in any batching', () => {
  const cfg = parseModelConfig({
    architectures: ['LlamaForCausalLM'],
    model_type: 'llama',
    vocab_size: 64,
    hidden_size: 16,
    intermediate_size: 32,
    num_hidden_layers: 1,
    num_attention_heads: 2,
    max_position_embeddings: 16,
    tie_word_embeddings: true,
  });
  const model = createModel(cfg);
  model.initialize(new Rng(1));
  const stream = Uint16Array.from({ length: 300 }, (_, i) => (i * 7) % 64);
  const offsets = [0, 50, 100, 200];
  const batch = windowsAt(stream, offsets, 16);
  const ce = noGrad(() => crossEntropy(model.forward(batch.ids, 4, 16), batch.targets).item());
  const one = meanTokenNll(model, stream, offsets, 16, 1);
  const three = meanTokenNll(model, stream, offsets, 16, 3);
  assert.equal(one.tokens, 64);
  assert.ok(Math.abs(one.meanNll - ce) < 1e-5, `mean NLL ${one.meanNll} vs cross-entropy ${ce}`);
  assert.ok(Math.abs(three.meanNll - one.meanNll) < 1e-5, `batch 3: ${three.meanNll}, batch 1: ${one.meanNll}`);
});
