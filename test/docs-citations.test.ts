/**
 * Comments and docs cite only what the repository holds (docs/*.md by heading, the reference
 * repositories by file path) or the public paper ("paper §5.1"). A section number of a document
 * that is not in the repository ("spec §1.9", "(§1.5)") is a dead reference: this fails on one.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join } from 'node:path';
import { test } from 'node:test';

const TEXT = new Set(['.ts', '.mts', '.mjs', '.js', '.py', '.sh', '.md', '.yaml', '.yml']);
const SKIP = new Set(['node_modules', 'fixtures', 'dist']);
const SELF = join('test', 'docs-citations.test.ts');

function files(root: string): string[] {
  const st = statSync(root, { throwIfNoEntry: false });
  if (!st) return [];
  if (st.isFile()) return [root];
  return readdirSync(root, { withFileTypes: true }).flatMap((e) => {
    const p = join(root, e.name);
    if (e.isDirectory()) return SKIP.has(e.name) ? [] : files(p);
    return TEXT.has(extname(e.name)) && p !== SELF ? [p] : [];
  });
}

const SCANNED = ['src', 'scripts', 'test', 'docs', 'configs', 'README.md'].flatMap(files);

/** Documents that were never part of the repository. */
const MISSING_DOCS = ['environments-reference.md', 'magrpo-reference-spec.md'];

/** `§` cites a section of the paper only: "paper §5.1". */
const BARE_SECTION = /(?<!paper )§/;

test('no file cites a document the repository does not contain', () => {
  const found: string[] = [];
  for (const file of SCANNED) {
    for (const [i, line] of readFileSync(file, 'utf8').split('\n').entries()) {
      const missing = MISSING_DOCS.find((d) => line.includes(d));
      if (missing || BARE_SECTION.test(line)) found.push(`${file}:${i + 1}: ${line.trim().slice(0, 120)}`);
    }
  }
  assert.deepEqual(
    found,
    [],
    'cite a heading of docs/*.md (docs/algorithms.md "The update, equation by equation"), a reference repository path, or "paper §N" for the paper',
  );
});

/** `docs/x.md "Heading"` in a comment, with the comment's line breaks joined. */
const HEADING_CITE = /docs\/([\w-]+)\.md,? "([^"]+)"/g;

test('every docs/*.md "Heading" cited in src/ and test/ exists', () => {
  const headings = new Map<string, Set<string>>();
  const headingsOf = (doc: string) => {
    if (!headings.has(doc)) {
      const text = readFileSync(join('docs', `${doc}.md`), 'utf8');
      headings.set(doc, new Set([...text.matchAll(/^#{1,4} (.+)$/gm)].map((m) => m[1].trim())));
    }
    return headings.get(doc) as Set<string>;
  };
  const cited = SCANNED.filter((f) => f.startsWith('src') || f.startsWith('test')).flatMap((file) => {
    const text = readFileSync(file, 'utf8').replace(/\n\s*(\*|\/\/)\s?/g, ' ');
    return [...text.matchAll(HEADING_CITE)].map((m) => ({ file, doc: m[1], heading: m[2].replace(/\s+/g, ' ') }));
  });
  assert.ok(cited.length > 0, 'src/ cites docs headings');
  const unknown = cited.filter((c) => !headingsOf(c.doc).has(c.heading)).map((c) => `${c.file}: docs/${c.doc}.md "${c.heading}"`);
  assert.deepEqual(unknown, [], 'cited headings must exist');
});
