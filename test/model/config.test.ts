import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { type ModelConfig, parseGenerationConfig, readGenerationConfig } from '../../src/model/config.js';
import { CheckpointError, type CheckpointErrorCode } from '../../src/model/errors.js';
import { parseModelConfig, readModelConfig, toHfConfig, writeModelConfig } from '../../src/model/hf-config.js';

const root = mkdtempSync(join(tmpdir(), 'magrpo-config-'));
after(() => rmSync(root, { recursive: true, force: true }));

/** Qwen/Qwen2.5-0.5B-Instruct config.json, verbatim apart from key order. */
const QWEN25_05B = {
  architectures: ['Qwen2ForCausalLM'],
  attention_dropout: 0.0,
  bos_token_id: 151643,
  eos_token_id: 151645,
  hidden_act: 'silu',
  hidden_size: 896,
  initializer_range: 0.02,
  intermediate_size: 4864,
  max_position_embeddings: 32768,
  max_window_layers: 21,
  model_type: 'qwen2',
  num_attention_heads: 14,
  num_hidden_layers: 24,
  num_key_value_heads: 2,
  rms_norm_eps: 1e-6,
  rope_theta: 1000000.0,
  sliding_window: 32768,
  tie_word_embeddings: true,
  torch_dtype: 'bfloat16',
  transformers_version: '4.43.1',
  use_cache: true,
  use_sliding_window: false,
  vocab_size: 151936,
};

/** openai-community/gpt2 config.json (abridged: summary_* keys dropped). */
const GPT2 = {
  activation_function: 'gelu_new',
  architectures: ['GPT2LMHeadModel'],
  attn_pdrop: 0.1,
  bos_token_id: 50256,
  embd_pdrop: 0.1,
  eos_token_id: 50256,
  initializer_range: 0.02,
  layer_norm_epsilon: 1e-5,
  model_type: 'gpt2',
  n_ctx: 1024,
  n_embd: 768,
  n_head: 12,
  n_layer: 12,
  n_positions: 1024,
  resid_pdrop: 0.1,
  task_specific_params: { 'text-generation': { do_sample: true, max_length: 50 } },
  vocab_size: 50257,
};

function expectError(fn: () => unknown, code: CheckpointErrorCode, message: string): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof CheckpointError, `expected CheckpointError, got ${err}`);
    assert.equal(err.code, code);
    assert.equal(err.message, message);
    return true;
  });
}

describe('parseModelConfig', () => {
  test('Qwen2.5-0.5B-Instruct', () => {
    assert.deepEqual(parseModelConfig(QWEN25_05B), {
      arch: 'llama',
      modelType: 'qwen2',
      vocabSize: 151936,
      hiddenSize: 896,
      intermediateSize: 4864,
      numLayers: 24,
      numHeads: 14,
      numKvHeads: 2,
      headDim: 64,
      maxPositions: 32768,
      tieWordEmbeddings: true,
      bosTokenId: 151643,
      eosTokenId: 151645,
      padTokenId: null,
      torchDtype: 'bfloat16',
      activation: 'silu',
      rmsNormEps: 1e-6,
      ropeTheta: 1000000,
      attentionBias: true,
      oProjBias: false,
      mlpBias: false,
      slidingWindow: null,
    });
  });

  test('GPT-2', () => {
    assert.deepEqual(parseModelConfig(GPT2), {
      arch: 'gpt2',
      modelType: 'gpt2',
      vocabSize: 50257,
      hiddenSize: 768,
      intermediateSize: 3072,
      numLayers: 12,
      numHeads: 12,
      numKvHeads: 12,
      headDim: 64,
      maxPositions: 1024,
      tieWordEmbeddings: true,
      bosTokenId: 50256,
      eosTokenId: 50256,
      padTokenId: null,
      torchDtype: null,
      activation: 'gelu_new',
      layerNormEps: 1e-5,
    });
  });

  test('GPT-2 defaults and HF attribute aliases', () => {
    const cfg = parseModelConfig({ model_type: 'gpt2', hidden_size: 64, num_attention_heads: 4, num_hidden_layers: 2, n_inner: null });
    assert.equal(cfg.arch, 'gpt2');
    assert.deepEqual(
      [
        cfg.hiddenSize,
        cfg.numHeads,
        cfg.headDim,
        cfg.numLayers,
        cfg.intermediateSize,
        cfg.maxPositions,
        cfg.vocabSize,
        cfg.tieWordEmbeddings,
        cfg.activation,
        cfg.arch === 'gpt2' && cfg.layerNormEps,
      ],
      [64, 4, 16, 2, 256, 1024, 50257, true, 'gelu_new', 1e-5],
    );
  });

  test('Llama defaults (LlamaConfig class defaults)', () => {
    const cfg = parseModelConfig({
      architectures: ['LlamaForCausalLM'],
      hidden_size: 64,
      num_attention_heads: 4,
      intermediate_size: 128,
      num_hidden_layers: 2,
    });
    assert.equal(cfg.arch, 'llama');
    if (cfg.arch !== 'llama') return;
    assert.deepEqual(
      {
        modelType: cfg.modelType,
        kv: cfg.numKvHeads,
        headDim: cfg.headDim,
        rope: cfg.ropeTheta,
        eps: cfg.rmsNormEps,
        tie: cfg.tieWordEmbeddings,
        bos: cfg.bosTokenId,
        eos: cfg.eosTokenId,
        maxPos: cfg.maxPositions,
        vocab: cfg.vocabSize,
        bias: [cfg.attentionBias, cfg.oProjBias, cfg.mlpBias],
      },
      { modelType: 'llama', kv: 4, headDim: 16, rope: 10000, eps: 1e-6, tie: false, bos: 1, eos: 2, maxPos: 2048, vocab: 32000, bias: [false, false, false] },
    );
  });

  test('Llama attention_bias covers q/k/v and o_proj; mlp_bias, head_dim and eos lists are read', () => {
    const cfg = parseModelConfig({
      model_type: 'llama',
      hidden_size: 64,
      num_attention_heads: 4,
      num_key_value_heads: 2,
      head_dim: 8,
      attention_bias: true,
      mlp_bias: true,
      eos_token_id: [128001, 128009],
      torch_dtype: 'float32',
    });
    assert.ok(cfg.arch === 'llama');
    assert.deepEqual(
      [cfg.attentionBias, cfg.oProjBias, cfg.mlpBias, cfg.headDim, cfg.numKvHeads, cfg.eosTokenId, cfg.torchDtype],
      [true, true, true, 8, 2, [128001, 128009], 'float32'],
    );
  });

  test('Qwen2 defaults: kv heads 32, tie false, q/k/v bias only', () => {
    const cfg = parseModelConfig({ architectures: ['Qwen2ForCausalLM'], hidden_size: 256, num_attention_heads: 32 });
    assert.ok(cfg.arch === 'llama');
    assert.deepEqual(
      [cfg.numKvHeads, cfg.tieWordEmbeddings, cfg.attentionBias, cfg.oProjBias, cfg.vocabSize, cfg.maxPositions, cfg.bosTokenId, cfg.eosTokenId],
      [32, false, true, false, 151936, 32768, null, null],
    );
  });

  test('Mistral records its sliding window (default 4096, null = none)', () => {
    const base = { architectures: ['MistralForCausalLM'], hidden_size: 64, num_attention_heads: 4, num_key_value_heads: 1 };
    const windowOf = (extra: object) => {
      const cfg = parseModelConfig({ ...base, ...extra });
      assert.ok(cfg.arch === 'llama');
      return cfg.slidingWindow;
    };
    assert.equal(windowOf({}), 4096);
    assert.equal(windowOf({ sliding_window: null }), null);
    assert.equal(windowOf({ sliding_window: 512 }), 512);
  });

  test('newer transformers keys: dtype and rope_parameters', () => {
    const cfg = parseModelConfig({
      model_type: 'llama',
      hidden_size: 64,
      num_attention_heads: 4,
      dtype: 'bfloat16',
      rope_parameters: { rope_type: 'default', rope_theta: 500000 },
    });
    assert.ok(cfg.arch === 'llama');
    assert.deepEqual([cfg.torchDtype, cfg.ropeTheta], ['bfloat16', 500000]);
    assert.throws(
      () => parseModelConfig({ model_type: 'llama', rope_parameters: { rope_type: 'default', rope_theta: -1 } }),
      /rope_parameters\.rope_theta: got -1/,
    );
  });
});

describe('parseModelConfig errors', () => {
  test('unknown architecture names the file and lists the supported ones', () => {
    expectError(
      () => readModelConfigFrom({ architectures: ['PhiForCausalLM'], model_type: 'phi' }),
      'UNKNOWN_ARCHITECTURE',
      `${join(root, 'arch', 'config.json')}: architecture "PhiForCausalLM" is not supported; supported: LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM, GPT2LMHeadModel — use a checkpoint of a supported architecture`,
    );
    expectError(
      () => parseModelConfig({ model_type: 'bert' }, 'x/config.json'),
      'UNKNOWN_ARCHITECTURE',
      'x/config.json: no supported "architectures" entry or model_type (got model_type "bert"); supported: LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM, GPT2LMHeadModel — use a checkpoint of a supported architecture',
    );
  });

  test('model_type contradicting architectures', () => {
    expectError(
      () => parseModelConfig({ architectures: ['Qwen2ForCausalLM'], model_type: 'llama' }),
      'BAD_CONFIG',
      'config.json: model_type: got "llama", expected "qwen2" for Qwen2ForCausalLM — make model_type match architectures',
    );
  });

  test('every bad field is reported in one error', () => {
    expectError(
      () =>
        parseModelConfig({
          model_type: 'llama',
          hidden_size: 'big',
          num_attention_heads: 6,
          num_key_value_heads: 4,
          rms_norm_eps: -1,
          tie_word_embeddings: 'yes',
          eos_token_id: [],
          torch_dtype: 'float64',
        }),
      'BAD_CONFIG',
      'config.json: invalid fields: hidden_size: got "big", expected a positive integer ≤ 131072; num_key_value_heads: got 4, expected a divisor of num_attention_heads (6); tie_word_embeddings: got "yes", expected true or false; eos_token_id: got [], expected a token id, a non-empty list of token ids, or null; torch_dtype: got "float64", expected "float32" or "float16" or "bfloat16"; rms_norm_eps: got -1, expected a positive number — fix these keys in config.json',
    );
  });

  test('features that would silently change the numerics are refused', () => {
    const base = { model_type: 'llama', hidden_size: 64, num_attention_heads: 4 };
    expectError(
      () => parseModelConfig({ ...base, rope_scaling: { rope_type: 'llama3', factor: 8 }, partial_rotary_factor: 0.5, hidden_act: 'gelu' }),
      'UNSUPPORTED_FEATURE',
      'config.json: unsupported settings: hidden_act: got "gelu" — only "silu" is implemented; rope_scaling: got {"rope_type":"llama3","factor":8} — only plain RoPE (null or rope_type "default") is implemented; partial_rotary_factor: got 0.5 — only full-head RoPE (1.0) is implemented — use a checkpoint without these features',
    );
    expectError(
      () => parseModelConfig({ model_type: 'qwen2', hidden_size: 64, num_attention_heads: 4, num_key_value_heads: 4, use_sliding_window: true }),
      'UNSUPPORTED_FEATURE',
      'config.json: unsupported settings: use_sliding_window: got true — sliding-window attention is not implemented; use a checkpoint with use_sliding_window: false — use a checkpoint without these features',
    );
    expectError(
      () => parseModelConfig({ ...GPT2, activation_function: 'relu', scale_attn_by_inverse_layer_idx: true }),
      'UNSUPPORTED_FEATURE',
      'config.json: unsupported settings: scale_attn_by_inverse_layer_idx: got true — per-layer attention scaling is not implemented; activation_function: got "relu" — only "gelu_new" or "gelu_pytorch_tanh" is implemented — use a checkpoint without these features',
    );
    // HF's "gelu" is the exact erf GELU; the engine computes the tanh one, so it is refused, not approximated.
    expectError(
      () => parseModelConfig({ ...GPT2, activation_function: 'gelu' }),
      'UNSUPPORTED_FEATURE',
      'config.json: unsupported settings: activation_function: got "gelu" — only "gelu_new" or "gelu_pytorch_tanh" is implemented — use a checkpoint without these features',
    );
    assert.equal(parseModelConfig({ ...GPT2, activation_function: 'gelu_pytorch_tanh' }).activation, 'gelu_pytorch_tanh');
    assert.equal(parseModelConfig({ ...base, rope_scaling: { type: 'default' } }).arch, 'llama');
  });

  test('missing config.json and invalid JSON', () => {
    const dir = mkdtempSync(join(root, 'missing-'));
    const file = join(dir, 'config.json');
    expectError(
      () => readModelConfig(dir),
      'FILE_MISSING',
      `${file}: file does not exist — point to a Hugging Face model folder (it must contain config.json)`,
    );
    writeFileSync(file, '{"model_type": ');
    assert.throws(
      () => readModelConfig(dir),
      (err: unknown) => err instanceof CheckpointError && err.code === 'BAD_CONFIG' && err.message.startsWith(`${file}: not valid JSON`),
    );
  });
});

/** Writes config.json into a fixed folder so error messages have a stable path. */
function readModelConfigFrom(json: object): ModelConfig {
  const dir = join(root, 'arch');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'config.json'), JSON.stringify(json));
  return readModelConfig(dir);
}

describe('toHfConfig round trip', () => {
  const configs: [string, object][] = [
    ['qwen2', QWEN25_05B],
    ['gpt2', GPT2],
    [
      'llama',
      {
        model_type: 'llama',
        hidden_size: 64,
        num_attention_heads: 4,
        num_key_value_heads: 2,
        attention_bias: true,
        mlp_bias: true,
        eos_token_id: [5, 6],
        pad_token_id: 0,
      },
    ],
    ['mistral', { model_type: 'mistral', hidden_size: 64, num_attention_heads: 4, num_key_value_heads: 1, sliding_window: null, bos_token_id: null }],
  ];
  for (const [name, json] of configs) {
    test(`${name}: parse(toHf(cfg)) deep-equals cfg, also through config.json on disk`, () => {
      const cfg = parseModelConfig(json);
      assert.deepEqual(parseModelConfig(toHfConfig(cfg)), cfg);
      const dir = mkdtempSync(join(root, `${name}-`));
      writeModelConfig(dir, cfg);
      assert.deepEqual(readModelConfig(dir), cfg);
      assert.equal((JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as { architectures: string[] }).architectures.length, 1);
    });
  }

  test('every fixture model folder parses and round-trips', () => {
    const fixtures = join(import.meta.dirname, '..', 'fixtures', 'models');
    const dirs = readdirSync(fixtures);
    assert.ok(dirs.includes('tiny-qwen2') && dirs.includes('tiny-gpt2') && dirs.includes('tiny-llama'));
    for (const name of dirs) {
      const cfg = readModelConfig(join(fixtures, name));
      assert.deepEqual(parseModelConfig(toHfConfig(cfg)), cfg, name);
    }
  });

  test('configs Hugging Face cannot express are refused instead of silently changed', () => {
    const qwen = parseModelConfig(QWEN25_05B);
    assert.ok(qwen.arch === 'llama');
    expectError(
      () => toHfConfig({ ...qwen, attentionBias: false }),
      'BAD_CONFIG',
      'config.json: this config cannot be written as a Hugging Face config: qwen2 always has q/k/v biases and no o_proj or MLP biases — fix the in-memory config',
    );
    const gpt2 = parseModelConfig(GPT2);
    assert.throws(() => toHfConfig({ ...gpt2, numKvHeads: 4 }), /numKvHeads = numHeads/);
  });
});

describe('generation_config.json', () => {
  test('Qwen2.5-Instruct generation config', () => {
    const dir = mkdtempSync(join(root, 'gen-'));
    writeFileSync(
      join(dir, 'generation_config.json'),
      JSON.stringify({
        bos_token_id: 151643,
        pad_token_id: 151643,
        do_sample: true,
        eos_token_id: [151645, 151643],
        repetition_penalty: 1.05,
        temperature: 0.7,
        top_p: 0.8,
        top_k: 20,
        transformers_version: '4.37.0',
      }),
    );
    assert.deepEqual(readGenerationConfig(dir), {
      bosTokenId: 151643,
      eosTokenId: [151645, 151643],
      padTokenId: 151643,
      doSample: true,
      temperature: 0.7,
      topP: 0.8,
      topK: 20,
    });
  });

  test('absent file gives {} and nulls are left out', () => {
    assert.deepEqual(readGenerationConfig(mkdtempSync(join(root, 'nogen-'))), {});
    assert.deepEqual(parseGenerationConfig({ pad_token_id: null, max_new_tokens: 64 }), { maxNewTokens: 64 });
  });

  test('bad values are reported together', () => {
    expectError(
      () => parseGenerationConfig({ top_p: 1.5, top_k: -1, temperature: 0 }, 'g.json'),
      'BAD_CONFIG',
      'g.json: invalid fields: temperature: got 0, expected a positive number; top_k: got -1, expected a non-negative integer; top_p: got 1.5, expected a number in (0, 1] — fix these keys in g.json',
    );
  });
});
