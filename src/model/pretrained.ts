/**
 * A language model as users meet it: weights + tokenizer + generation defaults from one HF
 * folder, with text-in/text-out sampling. The RL trainer and the CLI both go through this.
 */
import { join } from 'node:path';
import { Rng } from '../engine/rng.js';
import { type GenerationDefaults, readGenerationConfig, writeGenerationConfig } from './config.js';
import { CheckpointError } from './errors.js';
import { isGgufFile, loadGgufWeights, readGgufModel } from './gguf-import.js';
import { loadModel, type SaveDtype, saveModel } from './load.js';
import { type FinishReason, generate, type SampleOptions } from './sample.js';
import { type Prompt, TextTokenizer } from './tokenizer.js';
import type { CausalLM } from './transformer.js';

/** `SampleOptions` for text prompts: stop ids come from the tokenizer (`stopAtEos`), and so does the decoder. */
export interface TextSampleOptions extends Omit<SampleOptions, 'stopTokenIds' | 'decode'> {
  /** Stop at the tokenizer's EOS tokens (default true). */
  stopAtEos?: boolean;
  /**
   * A prompt longer than the context minus maxNewTokens: 'none' (default) is an error; 'left'
   * keeps its last tokens (and a leading BOS), as inference baselines truncate long inputs.
   */
  truncate?: 'none' | 'left';
}

export interface TextSample {
  /** Prompt token ids (with the tokenizer's special tokens, e.g. BOS). */
  promptIds: number[];
  /** Completion token ids, including a final EOS / stop-string tokens. */
  completionIds: number[];
  /** Completion text without special tokens, cut before a stop string. */
  text: string;
  logprobs: number[];
  finishReason: FinishReason;
}

export class LanguageModel {
  constructor(
    readonly model: CausalLM,
    readonly tokenizer: TextTokenizer,
    readonly generation: GenerationDefaults = {},
    /** Folder it was loaded from (informational). */
    readonly source = '',
  ) {}

  /**
   * Loads a model: a HF folder (config.json, weights, tokenizer.json, generation_config.json) or
   * a GGUF file (dequantized to fp32 in memory; `magrpo convert` writes it as a folder once).
   */
  static load(dir: string): LanguageModel {
    if (isGgufFile(dir)) {
      const m = readGgufModel(dir);
      const tokenizer = TextTokenizer.fromFiles(m.tokenizerFiles, dir, m.generation);
      return new LanguageModel(loadGgufWeights(m), tokenizer, m.generation, dir);
    }
    const model = loadModel(dir);
    const tokenizer = TextTokenizer.fromDir(dir);
    const generation = readGenerationConfig(dir);
    if (tokenizer.vocabSize > model.vocabSize) {
      const file = join(dir, 'tokenizer.json');
      throw new CheckpointError(
        'SHAPE_MISMATCH',
        file,
        `the tokenizer has ${tokenizer.vocabSize} tokens but the model's vocabulary is ${model.vocabSize}`,
        'use the tokenizer the model was trained with',
      );
    }
    return new LanguageModel(model, tokenizer, generation, dir);
  }

  /** Writes weights, config, generation defaults and tokenizer as a HF folder. */
  save(dir: string, dtype: SaveDtype = 'F32'): void {
    saveModel(this.model, dir, dtype);
    this.tokenizer.saveTo(dir);
    if (Object.keys(this.generation).length > 0) writeGenerationConfig(dir, this.generation);
  }

  /** End-of-sequence ids from the tokenizer and generation_config.json, and with `chat` the template's end-of-turn token. */
  stopIds(chat = false): number[] {
    const gen = this.generation.eosTokenId;
    const turn = chat ? this.tokenizer.chatEndId : null;
    return [...new Set([...this.tokenizer.eosIds, ...(gen === undefined ? [] : [gen].flat()), ...(turn === null ? [] : [turn])])];
  }

  encode(text: string): number[] {
    return this.tokenizer.encode(text);
  }

  /**
   * Samples one completion per prompt, batched. Prompts become ids through `tokenizer.promptIds`;
   * when any is a list of chat messages, the template's end-of-turn token also ends generation.
   */
  sample(prompts: readonly Prompt[], opts: TextSampleOptions): TextSample[] {
    const budget = this.model.maxPositions - opts.maxNewTokens;
    const promptIds = prompts.map((p) => {
      const ids = this.tokenizer.promptIds(p);
      if (opts.truncate !== 'left' || ids.length <= budget) return ids;
      const bos = this.tokenizer.bosId !== null && ids[0] === this.tokenizer.bosId ? [ids[0]] : [];
      return [...bos, ...ids.slice(ids.length - (budget - bos.length))];
    });
    const rng = opts.rng instanceof Rng ? opts.rng : new Rng(opts.rng ?? 0);
    const out = generate(this.model, promptIds, {
      maxNewTokens: opts.maxNewTokens,
      temperature: opts.temperature,
      topK: opts.topK,
      topP: opts.topP,
      stopTokenIds: opts.stopAtEos === false ? [] : this.stopIds(prompts.some((p) => typeof p !== 'string')),
      stopStrings: opts.stopStrings,
      decode: (ids) => this.tokenizer.decode(ids, { skipSpecialTokens: true }),
      rng,
      rowRngs: opts.rowRngs,
    });
    return promptIds.map((ids, i) => ({
      promptIds: ids,
      completionIds: out.tokens[i],
      text: out.texts[i],
      logprobs: out.logprobs[i],
      finishReason: out.finishReasons[i],
    }));
  }
}

/** The tokenizer of a HF model folder or a GGUF file, without loading weights. */
export function loadTokenizer(path: string): TextTokenizer {
  if (!isGgufFile(path)) return TextTokenizer.fromDir(path);
  const m = readGgufModel(path);
  return TextTokenizer.fromFiles(m.tokenizerFiles, path, m.generation);
}
