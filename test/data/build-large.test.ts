/**
 * The large corpus: every source carries licence metadata and is installed by the setup script;
 * a small build (real eval sets and validation split, npm + generated sources, and a test source
 * that plants contaminated and validation documents) drops what it must and is deterministic;
 * markup conversion; the committed manifest-large.json and data card agree.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { readJsonlGz, sha256Hex } from '../../src/data/build-corpus.js';
import { buildLargeCorpus, type LargeCorpus, writeJsonlGzStream } from '../../src/data/build-large.js';
import type { LargeManifest } from '../../src/data/datacard-large.js';
import { DecontamIndex, readEvalProblems } from '../../src/data/decontam.js';
import { LARGE_SOURCES, type LargeSource } from '../../src/data/large-sources.js';
import { htmlToText, rstToText } from '../../src/data/markup.js';
import { pythonDefs } from '../../src/data/pydefs.js';
import { stripLicenceHeader } from '../../src/data/sources-deb.js';

const root = join(import.meta.dirname, '../..');
const problems = [
  ...readEvalProblems(join(root, 'data/coding/coop-python.eval.jsonl'), 'coop-python-eval'),
  ...readEvalProblems(join(root, 'data/humaneval/HumanEval.jsonl.gz'), 'humaneval'),
];
const validation = readJsonlGz(join(root, 'data/corpus/validation.jsonl.gz'));

describe('large corpus sources', () => {
  it('each states a licence, a title, a note and the evidence the build checks', () => {
    const names = new Set<string>();
    for (const s of LARGE_SOURCES) {
      assert.ok(!names.has(s.name), `duplicate source ${s.name}`);
      names.add(s.name);
      assert.ok(s.licence.length > 2 && s.title.length > 5 && s.note.length > 5, s.name);
      if (s.origin.kind === 'generated') assert.equal(s.evidence, null, s.name);
      else {
        assert.ok(s.origin.packages.length > 0, s.name);
        assert.ok(s.evidence instanceof RegExp, `${s.name} has no licence evidence`);
      }
      assert.doesNotMatch(s.licence, /^(?:L?GPL|AGPL|GFDL|CC-BY-SA)/, `${s.name}: content must be permissively licensed`);
    }
  });

  it('are installed by the setup script (Debian) or package.json (npm)', () => {
    const setup = readFileSync(join(root, 'scripts/setup.sh'), 'utf8');
    const list = /DATA_PACKAGES=\(([^)]*)\)/.exec(setup)?.[1].split(/\s+/).filter(Boolean) ?? [];
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> };
    for (const s of LARGE_SOURCES) {
      if (s.origin.kind === 'deb') for (const p of s.origin.packages) assert.ok(list.includes(p), `${p} (${s.name}) missing from setup.sh --with-data`);
      if (s.origin.kind === 'npm') for (const p of s.origin.packages) assert.ok(p in pkg.devDependencies, `${p} missing from devDependencies`);
    }
  });
});

/** A test double standing in for a Debian source: clean prose, a planted eval solution, a validation copy. */
function plantedSource(): LargeSource {
  const he = problems.find((p) => p.id === 'humaneval:HumanEval/0') as (typeof problems)[number];
  const coop = problems.find((p) => p.id.startsWith('coop-python-eval')) as (typeof problems)[number];
  const solution = he.solutions[0].replace(/def has_close_elements/, 'def any_close');
  const proseValidation = validation.find((d) => d.source === 'brown') as { text: string };
  return {
    name: 'planted',
    group: 'docs',
    title: 'test double',
    origin: { kind: 'generated' },
    licence: 'test',
    evidence: null,
    maxChars: null,
    note: 'test',
    read: () => [
      { source: 'planted', id: 'clean', text: `A clean page about tea.\n\n${'Tea is brewed from leaves and served hot or cold. '.repeat(8)}` },
      { source: 'planted', id: 'solution', text: `Here is a helper we use.\n\n${solution}\n\nIt works well for money.` },
      {
        source: 'planted',
        id: 'prompt',
        text: `A puzzle from a blog:\n\n${coop.prompt}\n\nTry it yourself before reading on. ${'More words follow here. '.repeat(8)}`,
      },
      { source: 'planted', id: 'validation', text: proseValidation.text },
    ],
  };
}

function smallBuild(): LargeCorpus {
  const pick = (name: string) => LARGE_SOURCES.find((s) => s.name === name) as LargeSource;
  return buildLargeCorpus({
    root,
    seed: 20240601,
    pythonTasks: 400,
    sources: [pick('moby-dick'), pick('js-snippets'), pick('python-gen'), plantedSource()],
    validation,
    decontam: new DecontamIndex(problems),
  });
}

describe('buildLargeCorpus (small build)', () => {
  const a = smallBuild();

  it('drops planted eval problems and validation copies, keeps clean text', () => {
    const planted = a.contamination.filter((c) => c.source === 'planted');
    assert.deepEqual(planted.map((c) => [c.id, c.kind]).sort(), [
      ['prompt', 'ngram'],
      ['solution', 'function-body'],
    ]);
    const report = a.reports.find((r) => r.name === 'planted');
    assert.equal(report?.validationDropped, 1);
    assert.equal(report?.docs, 1);
    assert.ok(a.train.some((d) => d.text.startsWith('A clean page about tea.')));
    // The generator's first tasks include the small corpus's validation tasks: none may leak.
    const gen = a.reports.find((r) => r.name === 'python-gen');
    assert.ok((gen?.validationDropped ?? 0) > 0, 'expected validation tasks among the first 400');
    const moby = a.reports.find((r) => r.name === 'moby-dick');
    assert.equal(moby?.validationDropped, validation.filter((d) => d.source === 'moby-dick').length);
  });

  it('output is disjoint from the eval problems and the validation split (independent checks)', () => {
    const text = a.train.map((d) => d.text).join('\n\u0000\n');
    for (const p of problems) assert.ok(!text.includes(p.prompt.trim()), `${p.id} prompt in corpus`);
    const evalBodies = new Set(
      problems.flatMap((p) => p.solutions.flatMap((s) => pythonDefs(s).filter((d) => d.name === p.entryPoint && d.body.length >= 40))).map((d) => d.body),
    );
    for (const d of a.train) for (const def of pythonDefs(d.text)) assert.ok(!evalBodies.has(def.body), `eval body in corpus: def ${def.name}`);
    const trainTexts = new Set(a.train.map((d) => d.text.replace(/\s+/g, ' ').trim()));
    for (const v of validation) assert.ok(!trainTexts.has(v.text.replace(/\s+/g, ' ').trim()), 'validation document in train');
  });

  it('is deterministic and round-trips through gzip JSONL', async () => {
    const b = smallBuild();
    assert.deepEqual(b.train, a.train);
    const dir = mkdtempSync(join(tmpdir(), 'large-'));
    try {
      const entry = await writeJsonlGzStream(join(dir, 'train.jsonl.gz'), a.train, 'train.jsonl.gz');
      assert.deepEqual(readJsonlGz(join(dir, 'train.jsonl.gz')), a.train);
      assert.equal(entry.text_sha256, sha256Hex(a.train.map((d) => `${JSON.stringify({ source: d.source, text: d.text })}\n`).join('')));
      assert.equal(entry.docs, a.train.length);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('markup', () => {
  it('reduces reStructuredText to text and keeps code blocks', () => {
    const rst = [
      'Title',
      '=====',
      '',
      '.. index:: single: foo',
      '',
      'Use :func:`len` or :class:`~collections.deque` with ``x``, see `docs <http://x>`_.',
      'This line wraps.',
      '',
      '.. function:: cache(user_function)',
      '',
      '   Simple *cache*.',
      '',
      '   .. versionadded:: 3.9',
      '',
      'Example::',
      '',
      '    def f():',
      '        return 1',
    ].join('\n');
    assert.equal(
      rstToText(rst),
      'Title\n\nUse len or collections.deque with x, see docs. This line wraps.\n\ncache(user_function)\n\nSimple cache.\n\nNew in version 3.9.\n\nExample:\n\n    def f():\n        return 1',
    );
  });

  it('reduces HTML to text: scripts and navigation out, entities decoded, <pre> kept', () => {
    const html =
      '<html><head><title>x</title></head><body><div class="navheader">Prev Next</div><script>var a=1;</script><h1>Joins<a class="headerlink" href="#">¶</a></h1><p>Rows &amp; tables,\n  joined&nbsp;&lt;here&gt;.</p><ul><li>one</li><li>two</li></ul><pre>SELECT *\n  FROM t;</pre></body></html>';
    assert.equal(htmlToText(html), 'Joins\n\nRows & tables, joined <here>.\n\n- one\n- two\n\n    SELECT *\n      FROM t;');
  });

  it('strips a licence header from Python files but keeps the shebang and ordinary comments', () => {
    assert.equal(stripLicenceHeader('#!/usr/bin/env python3\n# Copyright 2020 X\n# Licensed under MIT\n\nimport os\n'), '#!/usr/bin/env python3\nimport os\n');
    assert.equal(stripLicenceHeader('# Helpers for parsing.\nimport os\n'), '# Helpers for parsing.\nimport os\n');
  });
});

describe('committed data/manifest-large.json', () => {
  const file = join(root, 'data/manifest-large.json');
  const m = JSON.parse(readFileSync(file, 'utf8')) as LargeManifest;

  it('records a ≥100M-character build of every source, decontaminated, with the shipped validation split', () => {
    assert.deepEqual(
      m.sources.map((s) => s.name),
      LARGE_SOURCES.map((s) => s.name),
    );
    const total = m.sources.reduce((n, s) => n + s.chars, 0);
    assert.ok(total >= 100_000_000, `only ${total} characters`);
    assert.equal(m.files[0].chars, total);
    assert.equal(m.decontamination.prompts_in_corpus, 0);
    for (const s of m.sources) assert.ok(s.licence !== '' && (s.packages.length > 0 || s.name === 'python-gen'), s.name);
    const small = JSON.parse(readFileSync(join(root, 'data/manifest.json'), 'utf8')) as { files: { path: string; text_sha256: string }[] };
    assert.equal(m.validation.text_sha256, small.files.find((f) => f.path === 'corpus/validation.jsonl.gz')?.text_sha256);
    assert.ok(m.code_eval_held_out.held_out >= 200, 'the pretraining code evaluation needs 200 held-out tasks');
  });

  it('is rendered in the data card', () => {
    const card = readFileSync(join(root, 'data/README.md'), 'utf8');
    assert.match(card, /## Large corpus/);
    for (const s of m.sources) assert.match(card, new RegExp(`\\| ${s.name} \\|`), s.name);
    assert.ok(existsSync(join(root, '.gitignore')) && /^\.cache\/$/m.test(readFileSync(join(root, '.gitignore'), 'utf8')), '.cache/ must be git-ignored');
  });
});
