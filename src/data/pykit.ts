/**
 * What a Python task template is, and the small random helpers templates share (names, inputs,
 * test cases). A template returns a function spec plus cases whose outputs it computed itself in
 * TypeScript; running the Python against those outputs is what verifies a generated task.
 */
import { type PyValue, pyRepr } from './pyvalue.js';
import type { Rng } from './rng.js';

export type PyKind = 'arith' | 'string' | 'list' | 'dict' | 'compose';
export const PY_KINDS: readonly PyKind[] = ['arith', 'string', 'list', 'dict', 'compose'];

/** A parameter: its name and the type annotation written when annotations are on. */
export type PyParam = readonly [name: string, type: string];

export interface PyFnSpec {
  name: string;
  params: PyParam[];
  returns: string;
  /** One or more sentences, no examples (the generator adds a `>>>` example to the main function). */
  doc: string;
  /** Function body lines, indented relative to the body (a nested block adds 4 spaces). */
  body: string[];
}

export interface PyCase {
  args: PyValue[];
  out: PyValue;
}

export interface PyTaskSpec {
  main: PyFnSpec;
  /** A function the main one calls; its code comes first in the program. */
  helper?: PyFnSpec;
  cases: PyCase[];
}

export interface PyTemplate {
  id: string;
  kind: PyKind;
  make(rng: Rng): PyTaskSpec;
}

export const NUM_NAMES = ['n', 'x', 'num', 'value', 'number', 'a'];
export const LIST_NAMES = ['nums', 'numbers', 'values', 'items', 'xs', 'arr', 'data', 'seq'];
export const STR_NAMES = ['s', 'text', 'phrase', 'line', 'sentence', 'string'];
export const WORD_NAMES = ['word', 's', 'token', 'w'];
export const WORDS_NAMES = ['words', 'tokens', 'names', 'strings'];
export const DICT_NAMES = ['d', 'mapping', 'table', 'counts', 'scores', 'inventory'];

export const WORDS = (
  'apple river stone cloud tiger paper light green music table water house night bread smile ' +
  'plant horse candle garden window silver rabbit orange forest yellow winter summer pencil ' +
  'rocket castle dragon mirror bottle pepper island planet rain sun moon star sky tree leaf code ' +
  'data list loop bug test byte node edge path map key value level radar noon civic kayak refer ' +
  'madam stats wow deed eye bob anna pop'
).split(' ');

/** `count` distinct picks from `pool`, none of which is in `avoid`. */
export function names(rng: Rng, pool: readonly string[], count: number, avoid: readonly string[] = []): string[] {
  return rng.sample(
    pool.filter((n) => !avoid.includes(n)),
    count,
  );
}

export function intList(rng: Rng, minLen: number, maxLen: number, lo: number, hi: number): number[] {
  return Array.from({ length: rng.int(minLen, maxLen) }, () => rng.int(lo, hi));
}

export function word(rng: Rng): string {
  return rng.pick(WORDS);
}

export function wordList(rng: Rng, minLen: number, maxLen: number): string[] {
  return Array.from({ length: rng.int(minLen, maxLen) }, () => word(rng));
}

export function sentence(rng: Rng, minWords: number, maxWords: number): string {
  return wordList(rng, minWords, maxWords).join(' ');
}

/** A lowercase letter. */
export function letter(rng: Rng): string {
  return String.fromCharCode(97 + rng.int(0, 25));
}

/**
 * 2–4 cases with distinct arguments. When the outputs are booleans, at least one of each is kept
 * if the input generator can produce both, so a constant `return True` cannot pass.
 */
export function makeCases<A extends PyValue[]>(rng: Rng, gen: () => [...A], f: (...args: A) => PyValue): PyCase[] {
  const want = rng.int(2, 4);
  const seen = new Set<string>();
  const found: PyCase[] = [];
  for (let tries = 0; tries < 200 && found.length < 12; tries++) {
    const args = gen();
    const key = pyRepr(args);
    if (seen.has(key)) continue;
    seen.add(key);
    found.push({ args, out: f(...args) });
  }
  const outs = new Set(found.map((c) => pyRepr(c.out)));
  if (outs.size > 1) {
    // Prefer a selection whose outputs differ, so a constant answer fails.
    const first = found[0];
    const other = found.find((c) => pyRepr(c.out) !== pyRepr(first.out)) as PyCase;
    const rest = found.filter((c) => c !== first && c !== other);
    return [first, other, ...rest].slice(0, want);
  }
  return found.slice(0, want);
}

/** `x + c` written naturally for a negative c. */
export function plus(expr: string, c: number): string {
  return c < 0 ? `${expr} - ${-c}` : `${expr} + ${c}`;
}

/** Python's `a % b` for b > 0 (the result takes the sign of b). */
export function pyMod(a: number, b: number): number {
  return ((a % b) + b) % b;
}
