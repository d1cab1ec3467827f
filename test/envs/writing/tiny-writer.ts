/**
 * A tiny random Llama with a byte-level BPE tokenizer (the tiny-qwen2 fixture's) and a 2048-token
 * context: writing prompts are a few hundred tokens, more than the 64-position fixtures hold.
 */
import { copyFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Rng } from '../../../src/engine/rng.js';
import { parseModelConfig } from '../../../src/model/hf-config.js';
import { createModel, saveModel } from '../../../src/model/load.js';

const TOKENIZER = join(import.meta.dirname, '../../fixtures/models/tiny-qwen2');

export function makeTinyWriter(seed = 1): string {
  const dir = mkdtempSync(join(tmpdir(), 'magrpo-writer-'));
  const model = createModel(
    parseModelConfig({
      architectures: ['LlamaForCausalLM'],
      model_type: 'llama',
      vocab_size: 296,
      hidden_size: 16,
      intermediate_size: 32,
      num_hidden_layers: 1,
      num_attention_heads: 2,
      num_key_value_heads: 1,
      max_position_embeddings: 2048,
      tie_word_embeddings: true,
      bos_token_id: 293,
      eos_token_id: 295,
    }),
  );
  model.initialize(new Rng(seed));
  saveModel(model, dir);
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) copyFileSync(join(TOKENIZER, f), join(dir, f));
  return dir;
}
