/**
 * Tiny HF-format model folders built on the fly for trainer tests: a word-level tokenizer over a
 * handful of words and a randomly initialised Llama or GPT-2, so RL tasks learn in seconds.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Rng } from '../../src/engine/rng.js';
import { parseModelConfig } from '../../src/model/config.js';
import { createModel, saveModel } from '../../src/model/load.js';

export const WORDS = ['go', 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'];

export function makeTinyModel(opts: { arch?: 'llama' | 'gpt2'; hidden?: number; layers?: number; seed?: number; dir?: string } = {}): string {
  const dir = opts.dir ?? mkdtempSync(join(tmpdir(), 'magrpo-tiny-'));
  mkdirSync(dir, { recursive: true });
  const vocab: Record<string, number> = { '<eos>': 0 };
  WORDS.forEach((w, i) => {
    vocab[w] = i + 1;
  });
  const V = WORDS.length + 1;
  const C = opts.hidden ?? 16;
  const L = opts.layers ?? 1;
  const hf =
    opts.arch === 'gpt2'
      ? {
          architectures: ['GPT2LMHeadModel'],
          model_type: 'gpt2',
          vocab_size: V,
          n_positions: 64,
          n_embd: C,
          n_layer: L,
          n_head: 2,
          eos_token_id: 0,
          bos_token_id: 0,
        }
      : {
          architectures: ['LlamaForCausalLM'],
          model_type: 'llama',
          vocab_size: V,
          hidden_size: C,
          intermediate_size: 2 * C,
          num_hidden_layers: L,
          num_attention_heads: 2,
          num_key_value_heads: 1,
          max_position_embeddings: 64,
          tie_word_embeddings: true,
          eos_token_id: 0,
          bos_token_id: 0,
        };
  const model = createModel(parseModelConfig(hf));
  model.initialize(new Rng(opts.seed ?? 1));
  saveModel(model, dir);
  const tokenizer = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [{ id: 0, content: '<eos>', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }],
    normalizer: null,
    pre_tokenizer: { type: 'WhitespaceSplit' },
    post_processor: null,
    decoder: null,
    model: { type: 'WordLevel', vocab, unk_token: '<eos>' },
  };
  writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(tokenizer));
  writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({ eos_token: '<eos>', pad_token: '<eos>' }));
  return dir;
}
