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
import { type FinishReason, generate, type SampleOptions, type SampleResult } from './sample.js';
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
    const promptIds = this.promptIdsFor(prompts, opts);
    const rng = opts.rng instanceof Rng ? opts.rng : new Rng(opts.rng ?? 0);
    const out = generate(this.model, promptIds, { ...this.generateOptions(prompts, opts), rng, rowRngs: opts.rowRngs });
    return textSamples(promptIds, out);
  }

  /**
   * Samples for several models that share one base (`CausalLM.sharesBaseWith`: agents with LoRA
   * adapters of their own) in one batch, so each decode step reads the base weights once for every
   * member's rows, each row under its member's adapters. A member's rows draw from its `rng` (or
   * its `rowRngs`) as `member.lm.sample(prompts, opts)` alone would, so with the same random
   * state the tokens are those of sampling each alone, up to the adapters' float rounding (their
   * own products here, merged into the packed weights there). Answers per member, in order.
   */
  static sampleTogether(members: readonly SampleMember[], opts: Omit<TextSampleOptions, 'rng' | 'rowRngs'>): TextSample[][] {
    if (members.length === 0) return [];
    const [lead] = members;
    const problem = LanguageModel.sampleTogetherProblem(members, opts);
    if (problem !== null) throw new Error(`sampleTogether: ${problem}`);
    const ids = members.map((m) => m.lm.promptIdsFor(m.prompts, opts));
    const out = generate(lead.lm.model, ids.flat(), {
      ...lead.lm.generateOptions(
        members.flatMap((m) => m.prompts),
        opts,
      ),
      rowRngs: members.flatMap((m) => m.prompts.map((_, k) => m.rowRngs?.[k] ?? m.rng)),
      rowAdapters: members.flatMap((m) => m.prompts.map(() => m.lm.model.lora)),
    });
    let at = 0;
    return ids.map((mine) => {
      const part = {
        tokens: out.tokens.slice(at, at + mine.length),
        texts: out.texts.slice(at, at + mine.length),
        logprobs: out.logprobs.slice(at, at + mine.length),
        finishReasons: out.finishReasons.slice(at, at + mine.length),
      };
      at += mine.length;
      return textSamples(mine, part);
    });
  }

  /**
   * Why `members` cannot sample in one batch (`sampleTogether`), or null when they can: each shares
   * member 0's base model and tokenizer, its prompts stop on the same tokens as member 0's (chat
   * prompts also at the template's end of turn), and its `rowRngs`, if any, are one per prompt.
   */
  static sampleTogetherProblem(
    members: readonly Pick<SampleMember, 'lm' | 'prompts' | 'rowRngs'>[],
    opts: Omit<TextSampleOptions, 'rng' | 'rowRngs'>,
  ): string | null {
    if (members.length === 0) return null;
    const [lead] = members;
    const stops = (m: (typeof members)[number]) => m.lm.stopTokenIds(m.prompts, opts).join(',');
    for (const [i, m] of members.entries()) {
      if (!m.lm.model.sharesBaseWith(lead.lm.model)) return `member ${i} does not share member 0's base model`;
      if (m.lm.tokenizer !== lead.lm.tokenizer) return `member ${i} has a tokenizer of its own; members share member 0's`;
      if (stops(m) !== stops(lead)) return `member ${i}'s prompts stop on other tokens than member 0's (chat and plain prompts mixed)`;
      if (m.rowRngs && m.rowRngs.length !== m.prompts.length) return `member ${i} has ${m.rowRngs.length} rowRngs for ${m.prompts.length} prompts`;
    }
    return null;
  }

  /** Each prompt's ids (`tokenizer.promptIds`), cut on the left to fit the context when `truncate` is 'left'. */
  private promptIdsFor(prompts: readonly Prompt[], opts: TextSampleOptions): number[][] {
    const budget = this.model.maxPositions - opts.maxNewTokens;
    return prompts.map((p) => {
      const ids = this.tokenizer.promptIds(p);
      if (opts.truncate !== 'left' || ids.length <= budget) return ids;
      const bos = this.tokenizer.bosId !== null && ids[0] === this.tokenizer.bosId ? [ids[0]] : [];
      return [...bos, ...ids.slice(ids.length - (budget - bos.length))];
    });
  }

  /** The ids that end a completion of `prompts`: none without `stopAtEos`, else `stopIds`, with chat prompts the end of turn too. */
  private stopTokenIds(prompts: readonly Prompt[], opts: Pick<TextSampleOptions, 'stopAtEos'>): number[] {
    return opts.stopAtEos === false ? [] : this.stopIds(prompts.some((p) => typeof p !== 'string'));
  }

  /** What `generate` is told for `prompts`: the knobs of `opts`, the stop ids (with chat prompts the end of turn too) and the decoder. */
  private generateOptions(prompts: readonly Prompt[], opts: TextSampleOptions) {
    return {
      maxNewTokens: opts.maxNewTokens,
      temperature: opts.temperature,
      topK: opts.topK,
      topP: opts.topP,
      stopTokenIds: this.stopTokenIds(prompts, opts),
      stopStrings: opts.stopStrings,
      decode: (ids: number[]) => this.tokenizer.decode(ids, { skipSpecialTokens: true }),
    };
  }
}

/** One member of `LanguageModel.sampleTogether`: a model, its prompts and its random source. */
export interface SampleMember {
  lm: LanguageModel;
  prompts: readonly Prompt[];
  rng: Rng;
  /** One random source per prompt, instead of `rng`. */
  rowRngs?: readonly Rng[];
}

function textSamples(promptIds: number[][], out: SampleResult): TextSample[] {
  return promptIds.map((ids, i) => ({
    promptIds: ids,
    completionIds: out.tokens[i],
    text: out.texts[i],
    logprobs: out.logprobs[i],
    finishReason: out.finishReasons[i],
  }));
}

/** The tokenizer of a HF model folder or a GGUF file, without loading weights. */
export function loadTokenizer(path: string): TextTokenizer {
  if (!isGgufFile(path)) return TextTokenizer.fromDir(path);
  const m = readGgufModel(path);
  return TextTokenizer.fromFiles(m.tokenizerFiles, path, m.generation);
}
