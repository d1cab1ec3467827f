/**
 * A tiny random word-level model whose vocabulary is a few Python words, so its samples are
 * sometimes real one-line functions ("def f(x): return aux(x) + 1"). Every other word of a prompt
 * encodes as <unk>; the context is widened to 4096 positions for the long coding prompts.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeTinyModel } from '../../helpers/tiny-model.js';

/** Ten tokens, the size of makeTinyModel's embedding. */
export const CODE_WORDS = ['<eos>', 'def', 'aux(x):', 'f(x):', 'return', 'x', 'aux(x)', '+', '1', '<unk>'];

export function makeTinyCoder(seed: number): string {
  const dir = makeTinyModel({ seed });
  const tokenizer = JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8'));
  tokenizer.model.vocab = Object.fromEntries(CODE_WORDS.map((w, i) => [w, i]));
  tokenizer.model.unk_token = '<unk>';
  writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(tokenizer));
  writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({ eos_token: '<eos>', pad_token: '<eos>', unk_token: '<unk>' }));
  const config = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...config, max_position_embeddings: 4096 }));
  return dir;
}
