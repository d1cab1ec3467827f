/**
 * Token pieces for the rollout browser's token-boundary view: piece[id] is the text of token `id`
 * decoded alone, from the tokenizer of the run's model (the trained agent 0 if the run finished,
 * else the model its config names). samples.jsonl records the sampled ids, so the page can show
 * exactly which tokens were trained, with their boundaries, without a tokenizer of its own.
 */
import { existsSync, readFileSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import { parse } from 'yaml';
import { TextTokenizer } from '../model/tokenizer.js';

/** The model folder whose tokenizer the run used, or null. */
export function runTokenizerDir(runDir: string): string | null {
  const candidates = [join(runDir, 'final', 'agent_0', 'model')];
  const configFile = join(runDir, 'config.yaml');
  if (existsSync(configFile)) {
    const config = parse(readFileSync(configFile, 'utf8')) as { model?: unknown; models?: unknown } | null;
    const named = typeof config?.model === 'string' ? config.model : Array.isArray(config?.models) ? config.models[0] : null;
    if (typeof named === 'string') candidates.push(isAbsolute(named) ? named : resolve(runDir, named));
  }
  return candidates.find((d) => existsSync(join(d, 'tokenizer.json'))) ?? null;
}

/** Every token id's text, decoded alone (special tokens included, as they were sampled). */
export function tokenPieces(tokenizerDir: string): string[] {
  const tok = TextTokenizer.fromDir(tokenizerDir);
  return Array.from({ length: tok.vocabSize }, (_, id) => tok.decode([id]));
}
