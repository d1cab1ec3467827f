/** Writing dataset loaders (JSONL, CSV, HF-style JSON; good and bad rows) and the shipped data. */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import { loadWritingItems, WritingDataError } from '../../../src/envs/writing/data.js';
import { arxivEnvironment, tldrEnvironment } from '../../../src/envs/writing/index.js';
import { tokenCount } from '../../../src/envs/writing/text-stats.js';

const dir = mkdtempSync(join(tmpdir(), 'magrpo-writing-data-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, content: string | Buffer): string {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
}

function rejects(f: () => unknown, code: string, pattern: RegExp) {
  assert.throws(f, (e: unknown) => {
    assert.ok(e instanceof WritingDataError, String(e));
    assert.equal(e.code, code);
    assert.match(e.message, pattern);
    return true;
  });
}

describe('loadWritingItems: good files', () => {
  it('JSONL: skips blank lines, keeps other fields, detects the field from the first row', () => {
    const f = file('a.jsonl', '{"prompt": "post one\\nTL;DR:", "id": 7}\n\n{"prompt": "post two TL;DR:"}\n');
    assert.deepEqual(loadWritingItems(f), [{ prompt: 'post one\nTL;DR:', id: 7 }, { prompt: 'post two TL;DR:' }]);
  });

  it('gzip’d JSONL with abstract_text', () => {
    const f = file('b.jsonl.gz', gzipSync('{"abstract_text": "An abstract."}\n'));
    assert.deepEqual(loadWritingItems(f, 'abstract_text'), [{ abstract_text: 'An abstract.' }]);
  });

  it('CSV with a header: quoted commas, newlines, "" escapes and CRLF', () => {
    const f = file('c.csv', '\uFEFFid,prompt\r\n1,"Hello, world\nTL;DR:"\r\n2,"She said ""hi"" TL;DR:"\r\n');
    assert.deepEqual(loadWritingItems(f, 'prompt'), [
      { id: '1', prompt: 'Hello, world\nTL;DR:' },
      { id: '2', prompt: 'She said "hi" TL;DR:' },
    ]);
  });

  it('HF-style JSON: an array, or {rows: [{row: {...}}]} as the datasets server returns', () => {
    const a = file('d.json', JSON.stringify([{ prompt: 'p1' }, { prompt: 'p2' }]));
    assert.deepEqual(
      loadWritingItems(a, 'prompt').map((r) => r.prompt),
      ['p1', 'p2'],
    );
    const b = file('e.json', JSON.stringify({ rows: [{ row_idx: 0, row: { abstract_text: 'x y' }, truncated_cells: [] }] }));
    assert.deepEqual(loadWritingItems(b), [{ abstract_text: 'x y' }]);
  });

  it('a raw arXiv abstract (list of <S>-tagged sentences) is joined into one paragraph', () => {
    const f = file('f.jsonl', `${JSON.stringify({ abstract_text: ['<S> we study  whales . </S>', '<S> they sing . </S>'] })}\n`);
    assert.equal(loadWritingItems(f, 'abstract_text')[0].abstract_text, 'we study whales . they sing .');
  });
});

describe('loadWritingItems: bad files name the file and the line', () => {
  it('invalid JSON on a JSONL line', () => {
    const f = file('bad1.jsonl', '{"prompt": "ok"}\n\n{"prompt": oops}\n');
    rejects(() => loadWritingItems(f), 'BAD_ROW', /bad1\.jsonl \(line 3\): invalid JSON/);
  });

  it('a row without the field, with a non-string or an empty field', () => {
    rejects(
      () => loadWritingItems(file('bad2.jsonl', '{"prompt": "ok"}\n{"text": "x"}\n'), 'prompt'),
      'BAD_ROW',
      /bad2\.jsonl \(line 2\): no "prompt" field \(fields: text\)/,
    );
    rejects(() => loadWritingItems(file('bad3.jsonl', '{"prompt": 5}\n'), 'prompt'), 'BAD_ROW', /\(line 1\): "prompt" is number/);
    rejects(() => loadWritingItems(file('bad4.jsonl', '{"prompt": "  "}\n'), 'prompt'), 'BAD_ROW', /\(line 1\): "prompt" is empty/);
    rejects(() => loadWritingItems(file('bad5.jsonl', '[1, 2]\n'), 'prompt'), 'BAD_ROW', /\(line 1\): expected an object/);
  });

  it('CSV: a row with the wrong number of fields (line of the record start), an unterminated quote', () => {
    rejects(
      () => loadWritingItems(file('bad6.csv', 'id,prompt\n1,"multi\nline"\n2,a,b\n'), 'prompt'),
      'BAD_ROW',
      /bad6\.csv \(line 4\): 3 fields, the header has 2/,
    );
    rejects(() => loadWritingItems(file('bad7.csv', 'prompt\n"open\n'), 'prompt'), 'BAD_ROW', /\(line 2\): unterminated quoted field/);
  });

  it('JSON: names the row; not a list; invalid JSON', () => {
    rejects(() => loadWritingItems(file('bad8.json', '[{"prompt": "a"}, {"prompt": ""}]'), 'prompt'), 'BAD_ROW', /bad8\.json \(row 1\): "prompt" is empty/);
    rejects(() => loadWritingItems(file('bad9.json', '{"data": []}')), 'BAD_FILE', /expected an array of rows/);
    rejects(() => loadWritingItems(file('bad10.json', '{')), 'BAD_FILE', /invalid JSON/);
  });

  it('missing, empty, or of unknown type', () => {
    rejects(() => loadWritingItems(join(dir, 'nope.jsonl')), 'FILE_MISSING', /nope\.jsonl: no such file/);
    rejects(() => loadWritingItems(file('empty.jsonl', '\n')), 'EMPTY', /no rows/);
    rejects(() => loadWritingItems(file('x.parquet', 'PAR1')), 'UNKNOWN_FORMAT', /use \.jsonl, \.csv or \.json/);
  });
});

describe('shipped data (data/writing)', () => {
  it('tldr: 1000 train / 1000 eval posts of 60–250 words ending in "\\nTL;DR:", disjoint splits', () => {
    const { train, eval: ev } = tldrEnvironment().defaultSplits();
    assert.equal(train.length, 1000);
    assert.equal(ev.length, 1000);
    for (const item of [...train, ...ev]) {
      assert.ok(item.prompt.endsWith('\nTL;DR:'), item.id as string);
      const post = item.prompt.slice(item.prompt.indexOf('POST: ') + 6, -'\n\nTL;DR:'.length);
      const n = tokenCount(post);
      assert.ok(n >= 60 && n <= 250, `${item.id}: ${n} words`);
    }
    const trainPosts = new Set(train.map((x) => x.prompt));
    assert.ok(ev.every((x) => !trainPosts.has(x.prompt)));
  });

  it('arxiv: 1000 train / 1000 eval one-paragraph abstracts of 100–300 tokens, token_count consistent', () => {
    const { train, eval: ev } = arxivEnvironment().defaultSplits();
    assert.equal(train.length, 1000);
    assert.equal(ev.length, 1000);
    for (const item of [...train, ...ev]) {
      const n = tokenCount(item.abstract_text);
      assert.ok(n >= 100 && n <= 300, `${item.id}: ${n} tokens`);
      assert.equal(item.token_count, n);
      assert.ok(!item.abstract_text.includes('\n'));
    }
    const ids = new Set([...train, ...ev].map((x) => x.id));
    assert.equal(ids.size, 2000);
  });
});
