import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parsePretrainConfig } from '../../src/pretrain/config.js';
import { type EvalJson, type ModelCardInput, renderModelCard } from '../../src/pretrain/model-card.js';

const config = parsePretrainConfig({
  run_dir: 'runs/x',
  model: { hidden_size: 256, intermediate_size: 704, num_layers: 6, num_heads: 4, context_length: 512 },
  train: { max_steps: 800, micro_batch_size: 4, learning_rate: 0.0015, warmup_steps: 40 },
  eval: { every_steps: 100 },
  checkpoint: { every_steps: 100 },
  export: { dir: 'models/small' },
});

const evalJson: EvalJson = {
  version: 1,
  model: { parameters: 5_868_800, non_embedding_parameters: 4_820_224, dtype: 'F16' },
  training: {
    completed: false,
    steps: 500,
    max_steps: 800,
    tokens: 1_024_000,
    tokens_per_step: 2048,
    epochs: 0.37,
    wall_time_s: 5400,
    final_train_loss: 4.1234,
    final_train_loss_steps: 20,
    final_val_loss_f32: 4.2,
  },
  perplexity: {
    definition: 'exp(mean token NLL) …',
    split: 'data/corpus/validation.jsonl.gz',
    corpus_sha256: 'ab'.repeat(32),
    tokenizer_sha256: 'cd'.repeat(32),
    stream_tokens: 71_259,
    window_tokens: 513,
    offsets: [0, 2000],
    targets: 1024,
    mean_nll: 4.2,
    perplexity: Math.exp(4.2),
  },
  code: null,
};

const input: ModelCardInput = {
  config,
  configFile: 'configs/pretrain/small.yaml',
  eval: evalJson,
  modelConfig: { vocab_size: 4096 },
  trainStamp: { corpus_sha256: 'ef'.repeat(32), tokenizer_sha256: 'cd'.repeat(32), max_docs: null, docs: 5645, tokens: 2_746_055 },
  trainCorpusSha256: 'ef'.repeat(32),
  samples: { prose: [{ prompt: 'Call me Ishmael.', completion: ' The sea.' }], code: [] },
  valCurve: [
    [250, 4.5],
    [500, 4.2],
  ],
  proseSampling: { temperature: 0.8, topP: 0.95, maxNewTokens: 60 },
  codeStops: ['\ndef '],
  sources: [
    { source: 'brown', docs: 10, chars: 1000 },
    { source: 'python-gen', docs: 30, chars: 3000 },
  ],
};

test('a run stopped early says exactly how far it got', () => {
  const card = renderModelCard(input);
  assert.ok(card.startsWith('# magrpo-small\n\nA 5.87 M-parameter Llama-style'));
  assert.ok(card.includes('**Training stopped early, at step 500 of 800**'));
  assert.ok(card.includes('| tokens seen | 1,024,000 (0.37 epochs of the training stream) |'));
  assert.ok(card.includes('| wall time | 1 h 30 min (5,400 s, validation passes included) |'));
  assert.ok(card.includes(`**Validation perplexity: ${Math.exp(4.2).toFixed(2)}**`));
  assert.ok(card.includes('| final training loss | 4.1234 (mean of the last 20 steps) |'));
  assert.ok(card.includes('```\nCall me Ishmael.⟨ The sea.⟩\n```'));
  assert.ok(!card.includes('**Code.**'), 'no code section without a code evaluation');
  assert.ok(card.includes('| 250 | 4.5000 |  |\n| 500 | 4.2000 | -0.3000 |'));
  assert.ok(card.includes('| python-gen | 30 | 3,000 | 75.0% |\n| brown | 10 | 1,000 | 25.0% |'), 'sources, largest first, with shares');
  assert.ok(!card.includes('word validity'), 'no fluency line without measured fluency');
  assert.ok(card.includes('Over the last 250 steps the validation loss changed by -0.3000 nats (-6.7%): it had **not flattened**'));
});

test('prose fluency and the machine are reported when measured', () => {
  const card = renderModelCard({
    ...input,
    eval: {
      ...evalJson,
      prose_fluency: { samples: 24, word_validity: 0.912, distinct_2: 0.81, repetition: 0.05 },
      machine: { cpu: 'AMD EPYC', threads: 2 },
    },
  });
  assert.ok(card.includes('Fluency of 24 such prose completions'));
  assert.ok(card.includes('word validity 91.2% of letters in real words'));
  assert.ok(card.includes('| machine | cpu AMD EPYC, threads 2 |'));
});

test('a completed run with code evidence reports both shares', () => {
  const code = {
    tasks: 200,
    seed: 7,
    skipped_overlap: 150,
    skipped_length: 2,
    parse_rate: 0.425,
    pass_rate: 0.05,
    temperature: 0.2,
    max_new_tokens: 128,
    stop_strings: ['\ndef '],
  };
  const card = renderModelCard({ ...input, eval: { ...evalJson, training: { ...evalJson.training, completed: true, steps: 800 }, code } });
  assert.ok(card.includes('Training ran to completion: 800 of 800 steps.'));
  const flat = renderModelCard({
    ...input,
    valCurve: [
      [700, 4.01],
      [800, 4.0],
    ],
  });
  assert.ok(flat.includes('(-0.2%): it had flattened.'));
  assert.match(card, /\| 42\.5% \|/);
  assert.match(card, /\| 5\.0% \|/);
  assert.ok(card.includes('seed 7, not the corpus seed; 150'));
});
