/** The source readers against the installed npm packages (devDependencies). */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { DataError } from '../../src/data/errors.js';
import { packageDir, packageInfo, readBrown, readJsSnippets, readMobyDick, readSotu, sampleByChars } from '../../src/data/sources.js';

const root = join(import.meta.dirname, '../..');

describe('source readers', () => {
  it('reads Moby-Dick by chapter, with headings and without the table of contents', () => {
    const docs = readMobyDick(root);
    assert.equal(docs.filter((d) => d.id.startsWith('chapter_')).length, 135);
    const first = docs.find((d) => d.id === 'chapter_1.json');
    assert.match(first?.text ?? '', /^CHAPTER 1\. Loomings\.\n\nCall me Ishmael\./);
    assert.ok(!docs.some((d) => d.id.startsWith('contents')));
  });

  it('samples State of the Union addresses up to the budget, deterministically', () => {
    const docs = readSotu(root, 300_000, 1);
    const chars = docs.reduce((n, d) => n + d.text.length, 0);
    assert.ok(chars >= 300_000 && chars < 600_000, String(chars));
    assert.deepEqual(readSotu(root, 300_000, 1), docs);
    assert.match(docs[0].text, /^.+, State of the Union address, \d{4}\n\n/);
    assert.ok(docs[0].text.split('\n\n').length > 5);
  });

  it('reads the Brown corpus without POS tags', () => {
    const docs = readBrown(root, 200_000, 1);
    assert.ok(docs.length >= 10);
    // Common tags; a bare `word/word` ("input/output") is legitimate text.
    for (const d of docs) assert.doesNotMatch(d.text, /\/(?:at|nn|nns|np|vb|vbd|vbn|in|jj|cc|rb|cs|to)(?:-tl|-hl)?(?:\s|$)/);
  });

  it('extracts JavaScript snippets with a description comment and code', () => {
    const docs = readJsSnippets(root);
    assert.ok(docs.length > 300);
    const all = docs.find((d) => d.id === 'README.md#all');
    assert.match(all?.text ?? '', /^\/\/ Returns `true` if .*\nconst all = \(arr, fn = Boolean\) => arr\.every\(fn\);\n\nall\(\[4, 2, 3\]/);
  });

  it('reports package versions and licence fields', () => {
    assert.equal(packageInfo(root, '30-seconds-of-code').license, 'CC0-1.0');
    assert.throws(
      () => packageDir(root, 'no-such-package'),
      (e: unknown) => e instanceof DataError && e.code === 'SOURCE_MISSING',
    );
  });

  it('sampleByChars keeps whole documents in id order', () => {
    const docs = ['c', 'a', 'b', 'd'].map((id) => ({ source: 'brown' as const, id, text: 'x'.repeat(10) }));
    const picked = sampleByChars(docs, 15, 9);
    assert.equal(picked.length, 2);
    assert.deepEqual(
      picked.map((d) => d.id),
      picked.map((d) => d.id).sort(),
    );
  });
});
