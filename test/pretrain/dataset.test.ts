import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { writeJsonlGz } from '../../src/data/build-corpus.js';
import { Rng } from '../../src/engine/rng.js';
import { backend } from '../../src/engine/runtime.js';
import { TextTokenizer } from '../../src/model/tokenizer.js';
import { fixedWindowOffsets, loadTokenStream, randomWindows, tokenizeDocuments, windowsAt } from '../../src/pretrain/dataset.js';

backend().setNumThreads(1);
const tok = TextTokenizer.fromDir('data/tokenizer');
const DOCS = ['Call me Ishmael.', 'def add(a, b):\n    return a + b\n', 'The end.'];

test('documents are joined as BOS doc EOS BOS doc EOS …', () => {
  const stream = tokenizeDocuments(DOCS, tok);
  assert.equal(tok.bosId, 0);
  assert.equal(tok.eosId, 1);
  const starts = [...stream.keys()].filter((i) => stream[i] === 0);
  const ends = [...stream.keys()].filter((i) => stream[i] === 1);
  assert.equal(starts.length, 3);
  assert.equal(ends.length, 3);
  assert.equal(stream[0], 0);
  assert.equal(stream[stream.length - 1], 1);
  for (let d = 0; d < 3; d++) {
    assert.equal(ends[d] + 1, starts[d + 1] ?? stream.length);
    assert.equal(tok.decode([...stream.subarray(starts[d] + 1, ends[d])]), DOCS[d]);
  }
});

test('the token cache is reused while corpus and tokenizer are unchanged, rebuilt when the corpus changes', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'magrpo-tokens-'));
  const corpus = join(dir, 'c.jsonl.gz');
  writeJsonlGz(
    corpus,
    DOCS.map((text) => ({ source: 'brown', text })),
  );
  const a = loadTokenStream(corpus, tok, 'data/tokenizer/tokenizer.json', join(dir, 'cache'), 'train');
  const mtime = statSync(join(dir, 'cache', 'train.u16')).mtimeMs;
  await new Promise((r) => setTimeout(r, 20));
  const b = loadTokenStream(corpus, tok, 'data/tokenizer/tokenizer.json', join(dir, 'cache'), 'train');
  assert.deepEqual(b.tokens, a.tokens);
  assert.equal(statSync(join(dir, 'cache', 'train.u16')).mtimeMs, mtime);
  assert.equal(a.stamp.docs, 3);
  assert.equal(a.stamp.tokens, a.tokens.length);

  writeJsonlGz(corpus, [{ source: 'brown', text: 'Another text entirely.' }]);
  const c = loadTokenStream(corpus, tok, 'data/tokenizer/tokenizer.json', join(dir, 'cache'), 'train');
  assert.notEqual(c.stamp.corpus_sha256, a.stamp.corpus_sha256);
  assert.deepEqual(c.tokens, tokenizeDocuments(['Another text entirely.'], tok));
  const sliced = loadTokenStream(corpus, tok, 'data/tokenizer/tokenizer.json', join(dir, 'cache2'), 'train', 1);
  assert.equal(sliced.stamp.max_docs, 1);
  assert.ok(existsSync(join(dir, 'cache2', 'train.json')));
});

test('windows: targets are the inputs shifted by one; sampling replays from a restored RNG', () => {
  const stream = Uint16Array.from({ length: 100 }, (_, i) => i);
  const w = windowsAt(stream, [0, 90], 9);
  assert.deepEqual([...w.ids.subarray(9, 18)], [90, 91, 92, 93, 94, 95, 96, 97, 98]);
  assert.deepEqual([...w.targets.subarray(9, 18)], [91, 92, 93, 94, 95, 96, 97, 98, 99]);
  assert.throws(() => windowsAt(stream, [91], 9), RangeError);

  const rng = new Rng(3);
  const saved = rng.getState();
  const a = randomWindows(stream, 5, 8, rng);
  rng.setState(saved);
  const b = randomWindows(stream, 5, 8, rng);
  assert.deepEqual(b, a);
  assert.notDeepEqual(randomWindows(stream, 5, 8, rng).ids, a.ids);
});

test('fixed validation windows are evenly spaced, in range and non-overlapping', () => {
  const offsets = fixedWindowOffsets(1000, 4, 99);
  assert.deepEqual(offsets, [0, 225, 450, 675]);
  for (const [i, o] of offsets.entries()) {
    assert.ok(o + 100 <= 1000);
    if (i > 0) assert.ok(o >= offsets[i - 1] + 100);
  }
  assert.throws(() => fixedWindowOffsets(50, 2, 60), RangeError);
});
