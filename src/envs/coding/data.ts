/**
 * Coding datasets in HumanEval's format: one JSON object per line with `task_id`, `prompt`
 * (signature + docstring), `test` (`def check(candidate): assert ...`) and `entry_point`;
 * `canonical_solution` is optional. A `.gz` suffix is gunzipped first.
 *
 * Shipped sets:
 *   humaneval    data/humaneval/HumanEval.jsonl.gz (164 problems, MIT). Splits as the paper-era
 *                configs (commit 8eceeec): train test[33:133] (100), eval test[:32] (32), and the
 *                paper-era final evaluation test[133:] (the last 31, baselines/he_single_agent.py).
 *                Index 32 (find_zero, no extractable single-line assert) is in none of them.
 *   coop-python  data/coding/coop-python.{train,eval}.jsonl, generated helper + main problems
 *                (scripts/build-coding-data.ts; see data/coding/README.md).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../../data/package-root.js';
import { readDatasetText } from '../dataset-file.js';

export interface CodingItem {
  task_id: string;
  /** Signature and docstring of the function to write (plus any imports and helpers it needs). */
  prompt: string;
  /** `def check(candidate): ...`; its single-line asserts are the reward's tests. */
  test: string;
  /** Name of the function the main agent writes. */
  entry_point: string;
  /** Body that completes `prompt` into a correct program, when known. */
  canonical_solution?: string;
  /** A known-good team answer: aux(...) ... (coop-python only). */
  aux_solution?: string;
  /** ... and the entry point calling aux (coop-python only). */
  main_solution?: string;
}

export type CodingDataErrorCode = 'FILE_MISSING' | 'BAD_FILE' | 'BAD_JSON' | 'BAD_ROW' | 'EMPTY';

/** A dataset file problem, naming the file and (when known) the 1-based line. */
export class CodingDataError extends Error {
  override readonly name = 'CodingDataError';

  constructor(
    readonly code: CodingDataErrorCode,
    readonly file: string,
    readonly line: number | null,
    problem: string,
    fix: string,
  ) {
    super(`${file}${line === null ? '' : `:${line}`}: ${problem} — ${fix}`);
  }
}

const REQUIRED = ['task_id', 'prompt', 'test', 'entry_point'] as const;
const OPTIONAL = ['canonical_solution', 'aux_solution', 'main_solution'] as const;

/** Reads a HumanEval-format JSONL file (`.jsonl` or `.jsonl.gz`); blank lines are skipped, other fields ignored. */
export function loadCodingJsonl(file: string): CodingItem[] {
  if (!existsSync(file)) throw new CodingDataError('FILE_MISSING', file, null, 'no such file', 'check the path');
  const read = readDatasetText(file);
  if (!('text' in read)) throw new CodingDataError('BAD_FILE', file, read.line, read.problem, read.fix);
  const { text } = read;
  const items: CodingItem[] = [];
  for (const [i, raw] of text.split('\n').entries()) {
    if (raw.trim() === '') continue;
    let row: unknown;
    try {
      row = JSON.parse(raw);
    } catch (e) {
      throw new CodingDataError('BAD_JSON', file, i + 1, `not valid JSON (${(e as Error).message})`, 'write one JSON object per line');
    }
    items.push(toItem(file, i + 1, row));
  }
  if (items.length === 0) throw new CodingDataError('EMPTY', file, null, 'no items', 'the file must hold at least one problem');
  return items;
}

function toItem(file: string, line: number, row: unknown): CodingItem {
  if (typeof row !== 'object' || row === null || Array.isArray(row)) {
    throw new CodingDataError('BAD_ROW', file, line, `expected a JSON object, got ${JSON.stringify(row)?.slice(0, 60)}`, 'write one object per problem');
  }
  const r = row as Record<string, unknown>;
  const bad = REQUIRED.filter((k) => typeof r[k] !== 'string' || r[k] === '');
  if (bad.length > 0) {
    const got = bad.map((k) => `${k} ${r[k] === undefined ? 'missing' : `= ${JSON.stringify(r[k])?.slice(0, 40)}`}`).join(', ');
    throw new CodingDataError('BAD_ROW', file, line, `needs non-empty string fields ${REQUIRED.join(', ')}; ${got}`, 'use the HumanEval format');
  }
  const notText = OPTIONAL.filter((k) => r[k] !== undefined && r[k] !== null && typeof r[k] !== 'string');
  if (notText.length > 0) throw new CodingDataError('BAD_ROW', file, line, `${notText.join(', ')} must be a string when present`, 'store code as text');
  if (!(r.test as string).includes('def check(candidate):')) {
    throw new CodingDataError(
      'BAD_ROW',
      file,
      line,
      'test has no `def check(candidate):`',
      'write the tests as HumanEval does: def check(candidate): assert candidate(...) == ...',
    );
  }
  const item: CodingItem = { task_id: r.task_id as string, prompt: r.prompt as string, test: r.test as string, entry_point: r.entry_point as string };
  for (const k of OPTIONAL) if (typeof r[k] === 'string') item[k] = r[k] as string;
  return item;
}

/** All 164 HumanEval problems in file order. */
export function loadHumanEval(file = join(packageRoot(), 'data', 'humaneval', 'HumanEval.jsonl.gz')): CodingItem[] {
  return loadCodingJsonl(file);
}

/** The paper-era HumanEval splits (see the module comment). */
export function humanevalSplits(all: readonly CodingItem[] = loadHumanEval()): { train: CodingItem[]; eval: CodingItem[]; final: CodingItem[] } {
  return { train: all.slice(33, 133), eval: all.slice(0, 32), final: all.slice(133) };
}

/** The shipped coop-python splits (or the same file names under `dir`). */
export function loadCoopPython(dir = join(packageRoot(), 'data', 'coding')): { train: CodingItem[]; eval: CodingItem[] } {
  return { train: loadCodingJsonl(join(dir, 'coop-python.train.jsonl')), eval: loadCodingJsonl(join(dir, 'coop-python.eval.jsonl')) };
}
