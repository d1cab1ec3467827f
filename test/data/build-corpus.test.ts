/**
 * Corpus pipeline units on small strings (cleaning, Brown POS-tag stripping, paragraph and document
 * dedup, the train/validation split, JSONL.gz I/O) and the committed data/ files against their manifest.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { gunzipSync } from 'node:zlib';
import {
  type CorpusDoc,
  cleanProse,
  dedupDocuments,
  dedupParagraphs,
  readJsonlGz,
  sha256Hex,
  splitDocuments,
  writeJsonlGz,
} from '../../src/data/build-corpus.js';
import {
  brownParagraphs,
  detokenize,
  dropChapterIndex,
  normalizeCode,
  normalizeProse,
  paragraphize,
  splitSentences,
  stripBoilerplate,
  untagBrownLine,
} from '../../src/data/clean.js';
import type { Manifest } from '../../src/data/datacard.js';
import type { RawDoc } from '../../src/data/sources.js';

const BROWN_LINE =
  "\tThe/at Fulton/np-tl County/nn-tl Grand/jj-tl Jury/nn-tl said/vbd Friday/nr an/at investigation/nn of/in Atlanta's/np$ recent/jj primary/nn election/nn produced/vbd ``/`` no/at evidence/nn ''/'' that/cs any/dti irregularities/nns took/vbd place/nn ./.";

describe('cleaning', () => {
  it('normalizes prose: quotes, spaces, blank lines, invisible characters', () => {
    assert.equal(
      normalizeProse('\ufeff“Call  me\u00a0Ishmael,” he said —\tit’s\u200b so.  \r\n\r\n\r\n\nNext…'),
      '"Call me Ishmael," he said — it\'s so.\n\nNext...',
    );
  });

  it('keeps code indentation but drops trailing spaces', () => {
    assert.equal(normalizeCode('def f():   \r\n\tif x:\n        return 1  \n\n\n\n\nf()\n\n'), 'def f():\n\tif x:\n        return 1\n\n\nf()');
  });

  it('strips Project Gutenberg header and licence', () => {
    const text =
      'The Project Gutenberg eBook of X\nlicence blah\n*** START OF THE PROJECT GUTENBERG EBOOK X ***\nStory text.\n*** END OF THE PROJECT GUTENBERG EBOOK X ***\nMore licence.';
    assert.equal(stripBoilerplate(text).trim(), 'Story text.');
    assert.equal(stripBoilerplate('No markers here.'), 'No markers here.');
  });

  it('drops tables of contents but keeps a chapter heading', () => {
    const toc = ['CONTENTS', 'CHAPTER 1. Loomings.', 'CHAPTER 2. The Carpet-Bag.', 'CHAPTER 3. The Spouter-Inn.'];
    assert.deepEqual(dropChapterIndex([...toc, 'Call me Ishmael.']), ['Call me Ishmael.']);
    assert.deepEqual(dropChapterIndex(['Chapter I\nChapter II\nChapter III', 'Text.']), ['Text.']);
    assert.deepEqual(dropChapterIndex(['CHAPTER 1. Loomings.', 'Call me Ishmael.']), ['CHAPTER 1. Loomings.', 'Call me Ishmael.']);
    assert.equal(cleanProse({ source: 'moby-dick', id: 'x', text: `${toc.join('\n\n')}\n\nBody  text.` }).text, 'Body text.');
  });

  it('splits sentences, not at abbreviations or initials', () => {
    assert.deepEqual(splitSentences('Mr. Smith met J. Doe in the U.S. today. They talked! Did it help? "Yes."'), [
      'Mr. Smith met J. Doe in the U.S. today.',
      'They talked!',
      'Did it help?',
      '"Yes."',
    ]);
    assert.deepEqual(paragraphize('One two. Three four. Five six.', 10), ['One two. Three four.', 'Five six.']);
  });
});

describe('Brown corpus', () => {
  it('strips POS tags and rebuilds a readable sentence', () => {
    assert.equal(
      untagBrownLine(BROWN_LINE),
      'The Fulton County Grand Jury said Friday an investigation of Atlanta\'s recent primary election produced "no evidence" that any irregularities took place.',
    );
  });

  it('attaches punctuation, brackets and quotes', () => {
    assert.equal(
      detokenize(['He', 'said', ',', '``', 'Go', '(', 'now', ')', '!', "''", 'and', 'left', '--', 'fast', ':', '$', '5', '.']),
      'He said, "Go (now)!" and left -- fast: $5.',
    );
    assert.equal(untagBrownLine('1/2/cd inch/nn ./.'), '1/2 inch.');
    assert.equal(untagBrownLine("``/`` Would/md it/pps ,/, Mary/np ''/'' ?/. ?/."), '"Would it, Mary?"');
    assert.equal(untagBrownLine('in/in March/np ;/. ;/. then/rb'), 'in March; then');
    assert.equal(untagBrownLine("``/`` Yes/rb ''/'' ,/, I/ppss said/vbd ``/`` no/rb ''/'' ;/. ;/."), '"Yes," I said "no";');
  });

  it('joins sentences into paragraphs and keeps headlines apart', () => {
    const raw = `\n\n${BROWN_LINE}\nIt/pps ended/vbd ./.\n\n\n\nMerger/nn-hl proposed/vbn-hl\nHowever/wrb ,/, it/pps did/dod ./.\n\n`;
    const paragraphs = brownParagraphs(raw);
    assert.equal(paragraphs.length, 3);
    assert.match(paragraphs[0], /took place\. It ended\.$/);
    assert.equal(paragraphs[1], 'Merger proposed');
    assert.equal(paragraphs[2], 'However, it did.');
  });
});

describe('dedup', () => {
  const long = 'The whale surfaced near the ship and every man on deck fell silent at once.';
  const doc = (id: string, ...paragraphs: string[]): RawDoc => ({ source: 'brown', id, text: paragraphs.join('\n\n') });

  it('drops exact and normalized repeats of paragraphs across documents, keeps short ones', () => {
    const { docs, dropped } = dedupParagraphs([
      doc('a', long, 'Aye, aye, sir!', 'Unique paragraph one, long enough to be deduplicated by key.'),
      doc('b', 'Aye, aye, sir!', `  ${long.toUpperCase().replace(/ /g, '  ')} `, 'Something else entirely, long enough to count here.'),
      doc('c', long),
    ]);
    assert.equal(dropped, 2);
    assert.deepEqual(
      docs.map((d) => d.id),
      ['a', 'b'],
    );
    assert.equal(docs[1].text, 'Aye, aye, sir!\n\nSomething else entirely, long enough to count here.');
  });

  it('deduplicates code per document, whitespace-insensitively', () => {
    const code = (text: string): RawDoc => ({ source: 'python-gen', id: text, text });
    const { docs, dropped } = dedupDocuments([code('def f():\n    return 1\n'), code('def f():\n  return 1'), code('def g():\n    return 1\n')]);
    assert.equal(dropped, 1);
    assert.equal(docs.length, 2);
  });
});

describe('splitDocuments', () => {
  const docs: CorpusDoc[] = [
    ...Array.from({ length: 100 }, (_, i) => ({ source: 'python-gen' as const, text: `p${i}` })),
    ...Array.from({ length: 5 }, (_, i) => ({ source: 'moby-dick' as const, text: `m${i}` })),
  ];

  it('puts ~fraction of each source in validation (at least one), disjoint and complete', () => {
    const { train, validation } = splitDocuments(docs, 0.03, 1);
    assert.equal(validation.filter((d) => d.source === 'python-gen').length, 3);
    assert.equal(validation.filter((d) => d.source === 'moby-dick').length, 1);
    assert.deepEqual([...train, ...validation].map((d) => d.text).sort(), docs.map((d) => d.text).sort());
  });

  it('is deterministic by seed', () => {
    assert.deepEqual(splitDocuments(docs, 0.03, 1), splitDocuments(docs, 0.03, 1));
    assert.notDeepEqual(splitDocuments(docs, 0.03, 1).validation, splitDocuments(docs, 0.03, 2).validation);
  });
});

describe('JSONL.gz files', () => {
  it('round-trip, with stable hashes', () => {
    const dir = mkdtempSync(join(tmpdir(), 'corpus-'));
    try {
      const docs: CorpusDoc[] = [
        { source: 'brown', text: 'A line.\n\n"Quoted" — ünïcode 🐋' },
        { source: 'python-gen', text: 'def f():\n    return 1\n' },
      ];
      const a = writeJsonlGz(join(dir, 'a.jsonl.gz'), docs);
      const b = writeJsonlGz(join(dir, 'b.jsonl.gz'), docs);
      assert.deepEqual(readJsonlGz(join(dir, 'a.jsonl.gz')), docs);
      assert.equal(a.sha256, b.sha256);
      assert.equal(a.text_sha256, sha256Hex(gunzipSync(readFileSync(join(dir, 'a.jsonl.gz')))));
      assert.equal(a.docs, 2);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('committed data/', () => {
  const dataDir = join(import.meta.dirname, '../../data');
  const manifest = JSON.parse(readFileSync(join(dataDir, 'manifest.json'), 'utf8')) as Manifest;

  it('matches the hashes and counts in manifest.json', () => {
    assert.equal(manifest.files.length, 4);
    for (const f of manifest.files) {
      const bytes = readFileSync(join(dataDir, f.path));
      assert.equal(sha256Hex(bytes), f.sha256, f.path);
      if (f.path.endsWith('.gz')) {
        assert.equal(sha256Hex(gunzipSync(bytes)), f.text_sha256, f.path);
        assert.equal(readJsonlGz(join(dataDir, f.path)).length, f.docs, f.path);
      }
    }
  });

  it('mixes prose and code in both splits', () => {
    const validation = readJsonlGz(join(dataDir, 'corpus/validation.jsonl.gz'));
    assert.deepEqual(new Set(validation.map((d) => d.source)), new Set(['moby-dick', 'sotu', 'brown', 'js-snippets', 'python-gen']));
    assert.ok(manifest.sources.every((s) => s.train_docs > 0 && s.validation_docs > 0));
  });
});
