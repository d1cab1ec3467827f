/**
 * Tiny HF-format model folders built on the fly for trainer tests: a word-level tokenizer over a
 * handful of words and a randomly initialised Llama or GPT-2, so RL tasks learn in seconds.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Rng } from '../../src/engine/rng.js';
import { parseModelConfig } from '../../src/model/hf-config.js';
import { createModel, saveModel } from '../../src/model/load.js';

export const WORDS = ['go', 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'];

/** The HF config of a tiny Llama for sampling tests: GQA (4 heads over 2), tied embeddings, 96 tokens. */
export const TINY_LLAMA_CONFIG = {
  model_type: 'llama',
  vocab_size: 96,
  hidden_size: 32,
  intermediate_size: 72,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  max_position_embeddings: 64,
  tie_word_embeddings: true,
};

/** ChatML, as SmolLM2-Instruct and Qwen2 write it (without their default system turn). */
export const CHATML_TEMPLATE =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
/** With `chat`: ChatML's two special tokens and its role names follow WORDS in the vocabulary. */
export const CHAT_TOKENS = ['<|im_start|>', '<|im_end|>'];
const ROLES = ['system', 'user', 'assistant'];

/**
 * With `chat`, the tokenizer also has ChatML's tokens and CHATML_TEMPLATE as its chat_template;
 * its EOS stays <eos>, so ending a turn at <|im_end|> is the template's doing.
 */
export function makeTinyModel(opts: { arch?: 'llama' | 'gpt2'; hidden?: number; layers?: number; seed?: number; dir?: string; chat?: boolean } = {}): string {
  const dir = opts.dir ?? mkdtempSync(join(tmpdir(), 'magrpo-tiny-'));
  mkdirSync(dir, { recursive: true });
  const vocab: Record<string, number> = { '<eos>': 0 };
  const words = opts.chat ? [...WORDS, ...CHAT_TOKENS, ...ROLES] : WORDS;
  words.forEach((w, i) => {
    vocab[w] = i + 1;
  });
  const V = words.length + 1;
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
    added_tokens: ['<eos>', ...(opts.chat ? CHAT_TOKENS : [])].map((content) => ({
      id: vocab[content],
      content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: true,
    })),
    normalizer: null,
    pre_tokenizer: { type: 'WhitespaceSplit' },
    post_processor: null,
    decoder: null,
    model: { type: 'WordLevel', vocab, unk_token: '<eos>' },
  };
  writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(tokenizer));
  const chat = opts.chat ? { chat_template: CHATML_TEMPLATE } : {};
  writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({ eos_token: '<eos>', pad_token: '<eos>', ...chat }));
  return dir;
}
