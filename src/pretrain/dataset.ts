/**
 * Token streams for pretraining. A corpus split is tokenized once into one stream
 *
 *   <|bos|> doc₀ <|eos|> <|bos|> doc₁ <|eos|> …
 *
 * and cached next to the run as little-endian uint16 ids (`<split>.u16`) plus a JSON stamp of what
 * produced it (corpus and tokenizer hashes), so a changed corpus or tokenizer re-tokenizes.
 * Training windows are drawn at uniformly random offsets with the run's seeded Rng; validation
 * uses a fixed list of offsets, so every evaluation scores exactly the same tokens.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { readJsonlGz } from '../data/build-corpus.js';
import type { Rng } from '../engine/rng.js';
import { writeFileAtomic } from '../model/atomic-write.js';
import type { TextTokenizer } from '../model/tokenizer.js';

export interface TokenStreamStamp {
  corpus_sha256: string;
  tokenizer_sha256: string;
  max_docs: number | null;
  docs: number;
  tokens: number;
}

export function sha256File(file: string): string {
  return createHash('sha256').update(readFileSync(file)).digest('hex');
}

/** Token ids of documents joined as BOS doc EOS BOS doc EOS …; ids must fit in uint16. */
export function tokenizeDocuments(texts: readonly string[], tokenizer: TextTokenizer): Uint16Array {
  if (tokenizer.vocabSize > 65536) throw new Error(`a vocabulary of ${tokenizer.vocabSize} ids does not fit the uint16 token cache`);
  const bos = tokenizer.bosId;
  const parts: number[][] = texts.map((t) => [...(bos === null ? [] : [bos]), ...tokenizer.encode(t, { addSpecialTokens: false }), tokenizer.eosId]);
  const out = new Uint16Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/**
 * The token stream of `corpusFile`, from `<cacheDir>/<name>.u16` when its stamp matches,
 * else tokenized and cached (atomically).
 */
export function loadTokenStream(
  corpusFile: string,
  tokenizer: TextTokenizer,
  tokenizerFile: string,
  cacheDir: string,
  name: string,
  maxDocs: number | null = null,
): { tokens: Uint16Array; stamp: TokenStreamStamp } {
  const binFile = join(cacheDir, `${name}.u16`);
  const stampFile = join(cacheDir, `${name}.json`);
  if (!existsSync(corpusFile)) {
    // The corpus (data/corpus, 3.3 MB) is build input for pretraining, left out of the npm package.
    throw new Error(
      `data.${name}: ${corpusFile} does not exist. The pretraining corpus is committed in the magrpo repository (a git clone has it), not shipped in the npm package; or point data.${name} at your own gzip JSONL of {"source", "text"} lines.`,
    );
  }
  const want = { corpus_sha256: sha256File(corpusFile), tokenizer_sha256: sha256File(tokenizerFile), max_docs: maxDocs };
  if (existsSync(binFile) && existsSync(stampFile)) {
    const stamp = JSON.parse(readFileSync(stampFile, 'utf8')) as TokenStreamStamp;
    if (stamp.corpus_sha256 === want.corpus_sha256 && stamp.tokenizer_sha256 === want.tokenizer_sha256 && stamp.max_docs === maxDocs) {
      const bytes = readFileSync(binFile);
      const tokens = new Uint16Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
      if (tokens.length === stamp.tokens) return { tokens, stamp };
    }
  }
  const docs = readJsonlGz(corpusFile);
  const texts = (maxDocs === null ? docs : docs.slice(0, maxDocs)).map((d) => d.text);
  const tokens = tokenizeDocuments(texts, tokenizer);
  const stamp: TokenStreamStamp = { ...want, docs: texts.length, tokens: tokens.length };
  mkdirSync(cacheDir, { recursive: true });
  writeFileAtomic(binFile, [new Uint8Array(tokens.buffer, tokens.byteOffset, tokens.byteLength)]);
  writeFileAtomic(stampFile, [`${JSON.stringify(stamp, null, 2)}\n`]);
  return { tokens, stamp };
}

/** A batch of windows: inputs and next-token targets, both [B·T] row-major. */
export interface Batch {
  ids: Int32Array;
  targets: Int32Array;
  batch: number;
  seqLen: number;
}

/** Windows of seqLen + 1 tokens starting at `offsets`: ids = w[0..T), targets = w[1..T]. */
export function windowsAt(tokens: Uint16Array, offsets: readonly number[], seqLen: number): Batch {
  const ids = new Int32Array(offsets.length * seqLen);
  const targets = new Int32Array(offsets.length * seqLen);
  offsets.forEach((o, b) => {
    if (o < 0 || o + seqLen + 1 > tokens.length) throw new RangeError(`window at ${o} of ${seqLen + 1} tokens overruns a stream of ${tokens.length}`);
    for (let t = 0; t < seqLen; t++) {
      ids[b * seqLen + t] = tokens[o + t];
      targets[b * seqLen + t] = tokens[o + t + 1];
    }
  });
  return { ids, targets, batch: offsets.length, seqLen };
}

/** `count` windows at uniformly random offsets, drawn from `rng` (so a restored rng replays them). */
export function randomWindows(tokens: Uint16Array, count: number, seqLen: number, rng: Rng): Batch {
  const span = tokens.length - seqLen - 1;
  if (span < 0) throw new RangeError(`a stream of ${tokens.length} tokens is shorter than one window of ${seqLen + 1}`);
  return windowsAt(
    tokens,
    Array.from({ length: count }, () => rng.int(span + 1)),
    seqLen,
  );
}

/**
 * `count` fixed window offsets spread evenly over the stream: offset_i = i · ⌊(N − T − 1) / count⌋
 * (non-overlapping whenever the stream is long enough).
 */
export function fixedWindowOffsets(streamLength: number, count: number, seqLen: number): number[] {
  const span = streamLength - seqLen - 1;
  if (span < 0) throw new RangeError(`a stream of ${streamLength} tokens is shorter than one window of ${seqLen + 1}`);
  const stride = Math.max(1, Math.floor(span / count));
  return Array.from({ length: count }, (_, i) => Math.min(i * stride, span));
}
