/**
 * Decontamination: keeps evaluation problems (the coop-python eval split, HumanEval) out of the
 * pretraining corpus. A document is contaminated when it
 *   - defines a function whose normalized body (pydefs.ts: docstring, comments and spacing ignored)
 *     equals the body of an eval problem's entry point (its reference solution), or
 *   - shares a run of NGRAM_WORDS words (lower case, letters and digits only) with an eval
 *     problem's prompt or reference solution,
 * and is then dropped whole. Word n-grams are hashed (two 32-bit hashes per n-gram) and every hash
 * hit is confirmed on the words themselves, so a hash collision never drops a document.
 */
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { DataError } from './errors.js';
import { pythonDefs } from './pydefs.js';

/** GPT-3's decontamination used 13-grams; shorter runs match common phrases ("return the number of"). */
export const NGRAM_WORDS = 13;
/** Bodies shorter than this (normalized) are idioms (`return len(s)`), not evidence of a copied solution. */
export const MIN_BODY_CHARS = 40;

export interface EvalProblem {
  /** `<set>:<task_id>`. */
  id: string;
  prompt: string;
  /** The entry point's reference solutions as whole programs (HumanEval's prompt + canonical_solution, and team forms). */
  solutions: string[];
  /** The texts whose word n-grams count: the prompt and the solutions without separate helper code. */
  ngramTexts: string[];
  entryPoint: string;
}

interface HumanEvalRecord {
  task_id: string;
  prompt: string;
  canonical_solution: string;
  entry_point: string;
  aux_solution?: string;
  main_solution?: string;
}

/** Problems of a HumanEval-format file (`.jsonl` or `.jsonl.gz`), e.g. data/coding/coop-python.eval.jsonl. */
export function readEvalProblems(file: string, set: string): EvalProblem[] {
  let text: string;
  try {
    const bytes = readFileSync(file);
    text = (file.endsWith('.gz') ? gunzipSync(bytes) : bytes).toString('utf8');
  } catch (e) {
    throw new DataError('SOURCE_MISSING', file, `eval problems not readable (${(e as Error).message})`, 'restore the file from git');
  }
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((line, i) => {
      const r = JSON.parse(line) as HumanEvalRecord;
      if (typeof r.prompt !== 'string' || typeof r.canonical_solution !== 'string' || typeof r.entry_point !== 'string') {
        throw new DataError('SOURCE_FORMAT', file, `line ${i + 1} lacks prompt, canonical_solution or entry_point`, 'use HumanEval-format JSON lines');
      }
      const solutions = [r.prompt + r.canonical_solution];
      let ngramTexts = [r.prompt + r.canonical_solution];
      if (r.main_solution !== undefined) {
        // A coop problem's canonical solution nests its helper, and a helper (`is_prime`) is shared by
        // every problem of its template: n-grams come from the main function alone, calling `aux`
        // (the team form) or the helper by its own name (the generator's form).
        const helper = /^\s*def\s+(\w+)/.exec(r.canonical_solution)?.[1];
        const mains = [r.main_solution, ...(helper === undefined ? [] : [r.main_solution.replace(/\baux\b/g, helper)])];
        solutions.push(...mains);
        ngramTexts = [r.prompt, ...mains];
      }
      return { id: `${set}:${r.task_id}`, prompt: r.prompt, solutions, ngramTexts, entryPoint: r.entry_point };
    });
}

export function words(text: string): string[] {
  return text.toLowerCase().match(/[a-z0-9]+/g) ?? [];
}

function wordHash(w: string, seed: number): number {
  let h = seed;
  for (let i = 0; i < w.length; i++) h = Math.imul(h ^ w.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** Hash keys (< 2^53) of every n-gram of `ws`, in order. */
function ngramKeys(ws: readonly string[], n: number): number[] {
  if (ws.length < n) return [];
  const h1 = ws.map((w) => wordHash(w, 0x811c9dc5));
  const h2 = ws.map((w) => wordHash(w, 0x2545f491));
  const keys: number[] = [];
  for (let i = 0; i + n <= ws.length; i++) {
    let a = 0x9e3779b9;
    let b = 0x85ebca6b;
    for (let k = i; k < i + n; k++) {
      a = Math.imul(a ^ h1[k], 0x01000193) + 0x7f4a7c15;
      b = Math.imul(b ^ h2[k], 0x5bd1e995) ^ (b >>> 13);
    }
    keys.push((a >>> 0) * 2097152 + ((b >>> 0) >>> 11));
  }
  return keys;
}

export interface Contamination {
  problem: string;
  kind: 'function-body' | 'ngram';
  /** The matching function name or the shared words. */
  evidence: string;
}

/** The eval problems' fingerprints; `check` tells whether a document reproduces any of them. */
export class DecontamIndex {
  private readonly bodies = new Map<string, string>();
  private readonly grams = new Map<number, { problem: string; words: string }>();
  readonly problems: number;

  constructor(
    problems: readonly EvalProblem[],
    readonly n = NGRAM_WORDS,
  ) {
    this.problems = problems.length;
    for (const p of problems) {
      for (const program of p.solutions) {
        for (const def of pythonDefs(program)) {
          if (def.name === p.entryPoint && def.body.length >= MIN_BODY_CHARS) this.bodies.set(def.body, p.id);
        }
      }
      for (const text of p.ngramTexts) {
        const ws = words(text);
        ngramKeys(ws, n).forEach((key, i) => {
          if (!this.grams.has(key)) this.grams.set(key, { problem: p.id, words: ws.slice(i, i + n).join(' ') });
        });
      }
    }
  }

  get fingerprints(): { bodies: number; ngrams: number } {
    return { bodies: this.bodies.size, ngrams: this.grams.size };
  }

  /** The first piece of eval text that `text` reproduces, or null. */
  check(text: string): Contamination | null {
    if (text.includes('def ')) {
      for (const def of pythonDefs(text)) {
        const problem = this.bodies.get(def.body);
        if (problem !== undefined) return { problem, kind: 'function-body', evidence: `def ${def.name}` };
      }
    }
    const ws = words(text);
    const keys = ngramKeys(ws, this.n);
    for (let i = 0; i < keys.length; i++) {
      const hit = this.grams.get(keys[i]);
      if (hit !== undefined && hit.words === ws.slice(i, i + this.n).join(' ')) return { problem: hit.problem, kind: 'ngram', evidence: hit.words };
    }
    return null;
  }
}
