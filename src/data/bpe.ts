/**
 * Byte-level BPE training (GPT-2 style) that writes a Hugging Face `tokenizer.json`.
 *
 * Text is split with GPT-2's pre-tokenizer regex, each piece is turned into UTF-8 bytes, and each byte
 * into a printable character (GPT-2's bytes-to-unicode map, so a space is `Ġ`). Merges are learned
 * from pair counts weighted by how often each distinct piece occurs. After every merge only the
 * pieces that contain the merged pair are rewritten and their pair counts adjusted; a lazy max-heap
 * holds candidate pairs (a popped entry whose count went stale is pushed back with the true count).
 *
 * Vocabulary layout: special tokens first (ids 0..S-1), then the 256 bytes in byte order (id S+b for
 * byte b), then one token per merge in merge order. Encoding is left to @huggingface/tokenizers,
 * which reads the output unchanged; the model floor wraps it.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DataError } from './errors.js';

/** GPT-2's split, the same pattern @huggingface/tokenizers and the Rust crate use for ByteLevel. */
export const GPT2_SPLIT = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;

export const DEFAULT_SPECIAL_TOKENS = ['<|bos|>', '<|eos|>', '<|pad|>', '<|user|>', '<|assistant|>', '<|system|>'] as const;

/** GPT-2's reversible byte → printable-character map: index = byte value. */
export function bytesToUnicode(): string[] {
  const printable: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) printable.push(b);
  for (let b = 0xa1; b <= 0xac; b++) printable.push(b);
  for (let b = 0xae; b <= 0xff; b++) printable.push(b);
  const out = new Array<string>(256);
  let shifted = 0;
  for (let b = 0; b < 256; b++) {
    out[b] = printable.includes(b) ? String.fromCharCode(b) : String.fromCharCode(256 + shifted++);
  }
  return out;
}

export interface BpeOptions {
  /** Total vocabulary size, special tokens and the 256 byte tokens included. */
  vocabSize: number;
  /** Added as special tokens with the first ids; the first three are bos, eos and pad. */
  specialTokens?: readonly string[];
  /** Stop merging once the most frequent pair occurs fewer times than this. */
  minFrequency?: number;
}

interface AddedTokenJson {
  id: number;
  content: string;
  single_word: false;
  lstrip: false;
  rstrip: false;
  normalized: false;
  special: true;
}

const BYTE_LEVEL = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: true } as const;

/** The subset of the Hugging Face tokenizer.json schema this trainer writes. */
export interface TokenizerJson {
  version: '1.0';
  truncation: null;
  padding: null;
  added_tokens: AddedTokenJson[];
  normalizer: null;
  pre_tokenizer: typeof BYTE_LEVEL;
  post_processor: typeof BYTE_LEVEL;
  decoder: typeof BYTE_LEVEL;
  model: {
    type: 'BPE';
    dropout: null;
    unk_token: null;
    continuing_subword_prefix: null;
    end_of_word_suffix: null;
    fuse_unk: boolean;
    byte_fallback: boolean;
    ignore_merges: boolean;
    vocab: Record<string, number>;
    merges: string[];
  };
}

export interface TokenizerConfig {
  tokenizer_class: 'PreTrainedTokenizerFast';
  bos_token: string;
  eos_token: string;
  pad_token: string;
  unk_token: null;
  add_bos_token: false;
  add_eos_token: false;
  /** False so that decode(encode(text)) === text: no space clean-up before punctuation. */
  clean_up_tokenization_spaces: false;
  additional_special_tokens: string[];
  added_tokens_decoder: Record<string, Omit<AddedTokenJson, 'id'>>;
  chat_template: string;
}

export interface TrainedTokenizer {
  tokenizerJson: TokenizerJson;
  tokenizerConfig: TokenizerConfig;
}

/**
 * `<|role|>\ncontent\n` per message; the generation prompt is `<|assistant|>\n`. No BOS/EOS is added:
 * callers choose their stop tokens (`<|eos|>`, or the next role token).
 */
export const CHAT_TEMPLATE =
  "{% for message in messages %}{{ '<|' + message['role'] + '|>\\n' + message['content'] + '\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}";

/** Distinct pre-tokens (pieces of the GPT-2 split) with how often each occurs. */
export function countPieces(texts: Iterable<string>): Map<string, number> {
  const counts = new Map<string, number>();
  for (const text of texts) {
    for (const m of text.matchAll(GPT2_SPLIT)) counts.set(m[0], (counts.get(m[0]) ?? 0) + 1);
  }
  return counts;
}

/** Max-heap of (pair key, count); ties go to the smaller key so training is deterministic. */
class PairHeap {
  private keys: number[] = [];
  private counts: number[] = [];

  get size(): number {
    return this.keys.length;
  }

  private above(i: number, j: number): boolean {
    return this.counts[i] > this.counts[j] || (this.counts[i] === this.counts[j] && this.keys[i] < this.keys[j]);
  }

  private swap(i: number, j: number): void {
    [this.keys[i], this.keys[j]] = [this.keys[j], this.keys[i]];
    [this.counts[i], this.counts[j]] = [this.counts[j], this.counts[i]];
  }

  push(key: number, count: number): void {
    this.keys.push(key);
    this.counts.push(count);
    let i = this.keys.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.above(i, parent)) break;
      this.swap(i, parent);
      i = parent;
    }
  }

  pop(): { key: number; count: number } {
    const top = { key: this.keys[0], count: this.counts[0] };
    const lastKey = this.keys.pop() as number;
    const lastCount = this.counts.pop() as number;
    if (this.keys.length > 0) {
      this.keys[0] = lastKey;
      this.counts[0] = lastCount;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let best = i;
        if (l < this.keys.length && this.above(l, best)) best = l;
        if (r < this.keys.length && this.above(r, best)) best = r;
        if (best === i) break;
        this.swap(i, best);
        i = best;
      }
    }
    return top;
  }
}

/** Symbols are < 2^16, so a pair (a, b) packs into one exact double key a·2^16 + b. */
const PAIR_BASE = 65536;

/**
 * Learns merges until the vocabulary reaches `vocabSize` (or no pair reaches `minFrequency`).
 * Returns the tokenizer.json and tokenizer_config.json objects, ready to be written or loaded.
 */
export function trainBpe(texts: Iterable<string>, options: BpeOptions): TrainedTokenizer {
  const specials = [...(options.specialTokens ?? DEFAULT_SPECIAL_TOKENS)];
  const minFrequency = options.minFrequency ?? 2;
  if (specials.length < 3) {
    throw new DataError('BAD_OPTIONS', 'options.specialTokens', `has ${specials.length} entries`, 'pass at least bos, eos and pad');
  }
  const symbolBudget = options.vocabSize - specials.length;
  if (symbolBudget < 256 || options.vocabSize > PAIR_BASE) {
    throw new DataError('BAD_OPTIONS', 'options.vocabSize', `got ${options.vocabSize}`, `use ${256 + specials.length}..${PAIR_BASE}`);
  }

  const byteChars = bytesToUnicode();
  const symbolText: string[] = byteChars.slice();
  const symbolOf = new Map<string, number>(symbolText.map((s, i) => [s, i]));
  const merges: string[] = [];

  const encoder = new TextEncoder();
  const words: number[][] = [];
  const weights: number[] = [];
  for (const [piece, count] of countPieces(texts)) {
    words.push(Array.from(encoder.encode(piece)));
    weights.push(count);
  }

  const pairCount = new Map<number, number>();
  // Which words may contain a pair: entries can go stale, so users re-check the word.
  const pairWords = new Map<number, number[]>();
  const addPair = (key: number, delta: number, word: number): void => {
    const next = (pairCount.get(key) ?? 0) + delta;
    if (next === 0) pairCount.delete(key);
    else pairCount.set(key, next);
    if (delta > 0) {
      const list = pairWords.get(key);
      if (list === undefined) pairWords.set(key, [word]);
      else if (list[list.length - 1] !== word) list.push(word);
    }
  };
  for (let w = 0; w < words.length; w++) {
    const word = words[w];
    for (let i = 0; i + 1 < word.length; i++) addPair(word[i] * PAIR_BASE + word[i + 1], weights[w], w);
  }
  const heap = new PairHeap();
  for (const [key, count] of pairCount) heap.push(key, count);

  const visited = new Int32Array(words.length).fill(-1);
  while (symbolOf.size < symbolBudget && heap.size > 0) {
    const { key, count } = heap.pop();
    const actual = pairCount.get(key) ?? 0;
    if (actual !== count) {
      if (actual > 0) heap.push(key, actual);
      continue;
    }
    if (count < minFrequency) break;
    const a = Math.floor(key / PAIR_BASE);
    const b = key % PAIR_BASE;
    const text = symbolText[a] + symbolText[b];
    merges.push(`${symbolText[a]} ${symbolText[b]}`);
    let merged = symbolOf.get(text);
    if (merged === undefined) {
      merged = symbolText.length;
      symbolText.push(text);
      symbolOf.set(text, merged);
    }

    const created = new Set<number>();
    for (const w of pairWords.get(key) ?? []) {
      if (visited[w] === merges.length) continue;
      visited[w] = merges.length;
      const word = words[w];
      const next: number[] = [];
      for (let i = 0; i < word.length; i++) {
        if (i + 1 < word.length && word[i] === a && word[i + 1] === b) {
          next.push(merged);
          i++;
        } else next.push(word[i]);
      }
      if (next.length === word.length) continue;
      const weight = weights[w];
      for (let i = 0; i + 1 < word.length; i++) addPair(word[i] * PAIR_BASE + word[i + 1], -weight, w);
      for (let i = 0; i + 1 < next.length; i++) {
        const k = next[i] * PAIR_BASE + next[i + 1];
        addPair(k, weight, w);
        if (next[i] === merged || next[i + 1] === merged) created.add(k);
      }
      words[w] = next;
    }
    pairWords.delete(key);
    // Pairs without the new symbol only lost counts (handled lazily); pairs with it are new.
    for (const k of created) {
      const c = pairCount.get(k);
      if (c !== undefined) heap.push(k, c);
    }
  }

  const vocab: Record<string, number> = {};
  specials.forEach((s, i) => {
    vocab[s] = i;
  });
  symbolText.forEach((s, i) => {
    vocab[s] = specials.length + i;
  });
  return { tokenizerJson: tokenizerJsonFor(specials, vocab, merges), tokenizerConfig: tokenizerConfigFor(specials) };
}

function addedToken(content: string, id: number): AddedTokenJson {
  return { id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true };
}

function tokenizerJsonFor(specials: string[], vocab: Record<string, number>, merges: string[]): TokenizerJson {
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: specials.map((s, i) => addedToken(s, i)),
    normalizer: null,
    pre_tokenizer: BYTE_LEVEL,
    post_processor: BYTE_LEVEL,
    decoder: BYTE_LEVEL,
    model: bpeModelJson(vocab, merges),
  };
}

/** tokenizer.json's `model` section of a byte-level BPE (the tokenizers library's field order). */
export function bpeModelJson(vocab: Record<string, number>, merges: string[], ignoreMerges = false) {
  return {
    type: 'BPE' as const,
    dropout: null,
    unk_token: null,
    continuing_subword_prefix: null,
    end_of_word_suffix: null,
    fuse_unk: false,
    byte_fallback: false,
    ignore_merges: ignoreMerges,
    vocab,
    merges,
  };
}

function tokenizerConfigFor(specials: string[]): TokenizerConfig {
  const decoder: TokenizerConfig['added_tokens_decoder'] = {};
  specials.forEach((s, i) => {
    const { id: _id, ...rest } = addedToken(s, i);
    decoder[String(i)] = rest;
  });
  return {
    tokenizer_class: 'PreTrainedTokenizerFast',
    bos_token: specials[0],
    eos_token: specials[1],
    pad_token: specials[2],
    unk_token: null,
    add_bos_token: false,
    add_eos_token: false,
    clean_up_tokenization_spaces: false,
    additional_special_tokens: specials.slice(3),
    added_tokens_decoder: decoder,
    chat_template: CHAT_TEMPLATE,
  };
}

/** Writes `tokenizer.json` and `tokenizer_config.json` into `dir` (created if missing). */
export function writeTokenizer(dir: string, trained: TrainedTokenizer): { tokenizerPath: string; configPath: string } {
  mkdirSync(dir, { recursive: true });
  const tokenizerPath = join(dir, 'tokenizer.json');
  const configPath = join(dir, 'tokenizer_config.json');
  writeFileSync(tokenizerPath, `${JSON.stringify(trained.tokenizerJson, null, 2)}\n`);
  writeFileSync(configPath, `${JSON.stringify(trained.tokenizerConfig, null, 2)}\n`);
  return { tokenizerPath, configPath };
}
