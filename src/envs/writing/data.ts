/**
 * Writing datasets: items with a `prompt` (TLDR: a post ending in "TL;DR:") or an `abstract_text`
 * (arXiv), read from JSON Lines, CSV with a header, or Hugging Face-style JSON (an array, or
 * `{rows: [...]}` as the datasets server returns, each row bare or as `{row: {...}}`). A `.gz`
 * suffix is gunzipped first. Every other field of a row is kept.
 */
import { existsSync } from 'node:fs';
import { readDatasetText } from '../dataset-file.js';
import { pySplit } from './text-stats.js';

export interface TldrItem {
  /** The post, ending in "TL;DR:". */
  prompt: string;
  [field: string]: unknown;
}

export interface ArxivItem {
  /** One paragraph. */
  abstract_text: string;
  [field: string]: unknown;
}

export type WritingField = 'prompt' | 'abstract_text';

export type WritingDataErrorCode = 'FILE_MISSING' | 'UNKNOWN_FORMAT' | 'BAD_FILE' | 'BAD_ROW' | 'EMPTY';

/** A dataset file problem; `where` is "line N" (JSONL, CSV) or "row N" (JSON), when known. */
export class WritingDataError extends Error {
  override readonly name = 'WritingDataError';

  constructor(
    readonly code: WritingDataErrorCode,
    readonly file: string,
    readonly where: string | null,
    problem: string,
    fix: string,
  ) {
    super(`${file}${where ? ` (${where})` : ''}: ${problem} — ${fix}`);
  }
}

interface RawRow {
  where: string;
  value: unknown;
}

export function loadWritingItems(file: string, field: 'prompt'): TldrItem[];
export function loadWritingItems(file: string, field: 'abstract_text'): ArxivItem[];
/** Without `field`, the first row decides: its `prompt`, else its `abstract_text`. */
export function loadWritingItems(file: string, field?: WritingField): (TldrItem | ArxivItem)[];
export function loadWritingItems(file: string, field?: WritingField): (TldrItem | ArxivItem)[] {
  if (!existsSync(file)) throw new WritingDataError('FILE_MISSING', file, null, 'no such file', 'check the path');
  const read = readDatasetText(file);
  if (!('text' in read)) return fail('BAD_FILE', file, read.line === null ? null : `line ${read.line}`, read.problem, read.fix);
  const { text } = read;
  const base = file.replace(/\.gz$/, '');
  const rows = /\.(jsonl|ndjson)$/.test(base)
    ? jsonlRows(file, text)
    : base.endsWith('.csv')
      ? csvRows(file, text)
      : base.endsWith('.json')
        ? jsonRows(file, text)
        : fail('UNKNOWN_FORMAT', file, null, 'unknown file type', 'use .jsonl, .csv or .json (optionally .gz)');
  if (rows.length === 0) throw new WritingDataError('EMPTY', file, null, 'no rows', 'the file must hold at least one item');
  const first = rows[0].value as Record<string, unknown> | null;
  const want = field ?? (first && typeof first === 'object' && 'prompt' in first ? 'prompt' : 'abstract_text');
  return rows.map((r) => toItem(file, r, want));
}

function toItem(file: string, { where, value }: RawRow, field: WritingField): TldrItem | ArxivItem {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return fail('BAD_ROW', file, where, `expected an object, got ${JSON.stringify(value)?.slice(0, 60)}`, 'write one JSON object per item');
  }
  const row = value as Record<string, unknown>;
  let text = row[field];
  // The raw arXiv corpus stores the abstract as "<S> sentence </S>" strings; join them as the
  // authors' data/create_arxiv_abstract.py does.
  if (field === 'abstract_text' && Array.isArray(text) && text.every((s) => typeof s === 'string')) {
    text = pySplit(text.join(' ').replace(/<\/?S>/g, ' ')).join(' ');
  }
  if (typeof text !== 'string') {
    const got = text === undefined ? `no "${field}" field (fields: ${Object.keys(row).join(', ') || 'none'})` : `"${field}" is ${typeof text}`;
    return fail('BAD_ROW', file, where, got, `give every row a "${field}" string`);
  }
  if (text.trim() === '') return fail('BAD_ROW', file, where, `"${field}" is empty`, `give every row a non-empty "${field}"`);
  return { ...row, [field]: text } as TldrItem | ArxivItem;
}

function jsonlRows(file: string, text: string): RawRow[] {
  const rows: RawRow[] = [];
  for (const [i, line] of text.split('\n').entries()) {
    if (line.trim() === '') continue;
    const where = `line ${i + 1}`;
    try {
      rows.push({ where, value: JSON.parse(line) });
    } catch (e) {
      fail('BAD_ROW', file, where, `invalid JSON (${(e as Error).message})`, 'write one JSON object per line');
    }
  }
  return rows;
}

function jsonRows(file: string, text: string): RawRow[] {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    return fail('BAD_FILE', file, null, `invalid JSON (${(e as Error).message})`, 'fix the file or save it as JSON Lines');
  }
  const list = Array.isArray(doc) ? doc : (doc as { rows?: unknown } | null)?.rows;
  if (!Array.isArray(list)) return fail('BAD_FILE', file, null, 'expected an array of rows or an object with a "rows" array', 'save the rows as a JSON array');
  // Datasets-server rows wrap each record as {row_idx, row: {...}}.
  return list.map((v, i) => ({ where: `row ${i}`, value: v && typeof v === 'object' && 'row' in v ? (v as { row: unknown }).row : v }));
}

/** RFC 4180: comma-separated, double-quoted fields may hold commas, newlines and "" for a quote. */
function csvRows(file: string, text: string): RawRow[] {
  const records: { line: number; fields: string[] }[] = [];
  let fields: string[] = [];
  let field = '';
  let quoted = false;
  let line = 1;
  let start = 1;
  let fresh = true;
  const endField = () => {
    fields.push(field);
    field = '';
  };
  const endRecord = () => {
    endField();
    if (!(fields.length === 1 && fields[0] === '')) records.push({ line: start, fields });
    fields = [];
    fresh = true;
  };
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (fresh) {
      start = line;
      fresh = false;
    }
    if (quoted) {
      if (ch === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (ch === '"') quoted = false;
      else {
        if (ch === '\n') line++;
        field += ch;
      }
    } else if (ch === '"' && field === '') quoted = true;
    else if (ch === ',') endField();
    else if (ch === '\n' || ch === '\r') {
      if (ch === '\r' && text[i + 1] === '\n') i++;
      endRecord();
      line++;
    } else field += ch;
  }
  if (quoted) fail('BAD_ROW', file, `line ${start}`, 'unterminated quoted field', 'close the quote (write "" for a literal quote)');
  if (!fresh) endRecord();
  if (records.length === 0) return [];
  const [header, ...body] = records;
  return body.map(({ line: at, fields: f }) => {
    if (f.length !== header.fields.length) {
      fail('BAD_ROW', file, `line ${at}`, `${f.length} fields, the header has ${header.fields.length}`, 'quote fields that contain commas');
    }
    return { where: `line ${at}`, value: Object.fromEntries(header.fields.map((h, j) => [h, f[j]])) };
  });
}

function fail(code: WritingDataErrorCode, file: string, where: string | null, problem: string, fix: string): never {
  throw new WritingDataError(code, file, where, problem, fix);
}
