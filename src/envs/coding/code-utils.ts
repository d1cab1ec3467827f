/**
 * Text surgery on model-written Python, reproducing the reference coding harness
 * (OpenMLRL/LLM_Collab_Code_Generation rewards/code_utils.py; docs/environments.md "Coding:
 * combining the agents' code"): cleanup_code, extract_specific_function, the prompt's imports, the combined
 * program, the "defined with return" check, aux-call detection, the thin-wrapper rule and the
 * reference's (broken) "ignored aux call" regex.
 *
 * The reference runs these as Python `re` patterns on `str`, where `\s` is str.isspace() and `\w`
 * is any letter or digit of any script; the classes below say the same in JS so that unusual
 * characters in sampled text are treated as the reference treats them.
 */

// Python's str.isspace() set: `\s` and str.strip() in the reference (JS \s differs: \x1c-\x1f, \x85, \ufeff).
const PY_SPACE = '\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
const S = `[${PY_SPACE}]`;
/** Python's `\w` on str: letters and digits of every script, and underscore. */
const W = '[\\p{L}\\p{N}_]';
const py = (source: string, flags = '') => new RegExp(source, `u${flags}`);

const STRIP = py(`^${S}+|${S}+$`, 'g');
const LEADING = py(`^${S}+`);
const DEF_START = py(`^${S}*def${S}+${W}+${S}*\\(`);
const ANY_DEF = py(`def${S}+${W}+${S}*\\(`);
const FENCE_PYTHON = py(`\`\`\`python${S}*\\n?`, 'g');
const FENCE = py(`\`\`\`${S}*\\n?`, 'g');
// A capitalised sentence ending in . ! ? or : (Python `.` excludes only \n, hence [^\n]).
const PROSE = /^[A-Z][a-z][^\n]*[.!?:]$/u;
const PROSE_EXEMPT = ['def ', 'return ', 'if ', 'for ', 'while ', '=', '(', ')', '[', ']'];
const RETURN = py(`return${S}+`);
const IMPORT_LINES = [py(`^from${S}+[\\p{L}\\p{N}_.]+${S}+import${S}+[^\\n]*$`), py(`^import${S}+[\\p{L}\\p{N}_.,${PY_SPACE}]+$`)];
const PROMPT_SIGNATURE = py(`def${S}+${W}+${S}*\\(([^)]+)\\)`);

/** Python str.strip(). */
export function pyStrip(text: string): string {
  return text.replace(STRIP, '');
}

function indentOf(line: string): number {
  return LEADING.exec(line)?.[0].length ?? 0;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}

/**
 * cleanup_code: strip ``` fences; keep only `def` blocks (the def line, then lines that are blank,
 * more indented, or docstring lines at the def's level); drop lines that read as English prose;
 * "" when no def is left. Top-level imports and constants the model wrote are lost (reference quirk).
 */
export function cleanupCode(code: string): string {
  if (!code) return '';
  const lines = code.replace(FENCE_PYTHON, '').replace(FENCE, '').split('\n');
  const blocks: string[] = [];
  let current: string[] = [];
  let inFunction = false;
  let baseIndent = 0;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const stripped = pyStrip(line);
    if (DEF_START.test(line)) {
      if (inFunction && current.length) blocks.push(current.join('\n'));
      current = [line];
      inFunction = true;
      baseIndent = indentOf(line);
    } else if (inFunction) {
      if (stripped === '' || line.startsWith(' '.repeat(baseIndent + 1)) || line.startsWith('\t')) {
        current.push(line);
      } else if (stripped.startsWith('"""') || stripped.startsWith("'''")) {
        current.push(line);
        const quote = stripped.slice(0, 3);
        if (!(stripped.endsWith(quote) && stripped.length > 3)) {
          // An unclosed docstring at the def's level: take lines up to the one holding the closing quote.
          for (i++; i < lines.length; i++) {
            current.push(lines[i]);
            if (lines[i].includes(quote)) break;
          }
        }
      } else {
        if (current.length) blocks.push(current.join('\n'));
        current = [];
        inFunction = false;
      }
    }
  }
  if (inFunction && current.length) blocks.push(current.join('\n'));
  const kept = blocks
    .join('\n\n')
    .split('\n')
    .filter((line) => !looksLikeProse(line));
  const result = pyStrip(kept.join('\n'));
  return ANY_DEF.test(result) ? result : '';
}

function looksLikeProse(line: string): boolean {
  const s = pyStrip(line);
  if (!s || s.startsWith('#') || s.startsWith('"""') || s.startsWith("'''")) return false;
  if (PROSE_EXEMPT.some((k) => line.includes(k))) return false;
  return PROSE.test(s);
}

/**
 * extract_specific_function: cleanupCode, then the block of the first `def <name>(` (a later
 * `def <name>(` inside it restarts the block), up to the first line that is neither blank nor
 * more indented. "" when absent.
 */
export function extractSpecificFunction(code: string, name: string): string {
  if (!code || !name) return '';
  const start = py(`^${S}*def${S}+${escapeRegExp(name)}${S}*\\(`);
  const out: string[] = [];
  let inTarget = false;
  let baseIndent = 0;
  for (const line of cleanupCode(code).split('\n')) {
    if (start.test(line)) {
      out.length = 0;
      out.push(line);
      inTarget = true;
      baseIndent = indentOf(line);
    } else if (inTarget) {
      if (pyStrip(line) === '' || line.startsWith(' '.repeat(baseIndent + 1)) || line.startsWith('\t')) out.push(line);
      else break;
    }
  }
  return pyStrip(out.join('\n'));
}

/** Import lines of the problem prompt (`from X import ...`, `import X, Y`), stripped, deduplicated. */
export function promptImports(prompt: string): string {
  if (!prompt) return '';
  const seen = new Set<string>();
  for (const raw of prompt.split('\n')) {
    const line = pyStrip(raw);
    if (IMPORT_LINES.some((p) => p.test(line))) seen.add(line);
  }
  return [...seen].join('\n');
}

/** concatenate_functions: prompt imports, cleaned aux, cleaned main, joined by blank lines. */
export function combineProgram(aux: string, main: string, imports: string): string {
  return [imports, cleanupCode(aux), cleanupCode(main)].filter((p) => p !== '').join('\n\n');
}

/** check_function_definition: the named function is extracted and contains `return\s+`. */
export function checkFunctionDefinition(code: string, name: string, description: string): { ok: boolean; message: string } {
  const fn = extractSpecificFunction(code, name);
  if (!fn) return { ok: false, message: `${description} not defined` };
  if (!RETURN.test(fn)) return { ok: false, message: `${description} missing return statement` };
  return { ok: true, message: `${description} properly defined with return statement` };
}

/** Parameters of the FIRST `def` in the prompt, split on commas (a helper defined before the entry point wins; annotations like `Dict[str, int]` split). */
export function promptParams(prompt: string): string[] {
  const m = PROMPT_SIGNATURE.exec(prompt);
  if (!m) return [];
  return m[1]
    .split(',')
    .map(pyStrip)
    .filter((p) => p !== '');
}

/** check_aux_function_usage: main contains a call `aux(` (word boundary before, spaces allowed before the parenthesis). */
export function callsAux(main: string, auxName = 'aux'): boolean {
  if (!main) return false;
  return py(`(?<![\\p{L}\\p{N}_])${escapeRegExp(auxName)}${S}*\\(`).test(main);
}

/** Which docstring handling the thin-wrapper rule uses (see isThinWrapper). */
export type ThinWrapperRule = 'fixed' | 'reference';

/**
 * is_wrapper_function: ignoring blank lines, comments, docstrings and `def` lines, main's body is
 * empty, a single `return ...aux...` line, or exactly `x = aux(...)` then `return x`.
 *
 * 'reference' reproduces the reference's docstring tracking, which never closes a docstring on a
 * line that itself starts with triple quotes: after a HumanEval-style docstring ending in a lone
 * `"""` line, every later line is skipped and main counts as a wrapper. 'fixed' closes docstrings
 * where Python does, which is the documented intent ("docstrings are ignored").
 */
export function isThinWrapper(main: string, rule: ThinWrapperRule = 'fixed', auxName = 'aux'): boolean {
  if (!main) return false;
  const code: string[] = [];
  let open: string | null = null;
  for (const line of main.split('\n')) {
    const s = pyStrip(line);
    if (!s) continue;
    if (rule === 'fixed' && open !== null) {
      if (s.includes(open)) open = null;
      continue;
    }
    if (s.startsWith('"""') || s.startsWith("'''")) {
      const quote = s.slice(0, 3);
      if (!(s.endsWith(quote) && s.length > 3)) open = quote;
      continue;
    }
    if (open !== null) {
      if (s.includes('"""') || s.includes("'''")) open = null;
      continue;
    }
    if (s.startsWith('#') || s.startsWith('def ')) continue;
    code.push(s);
  }
  if (code.length === 0) return true;
  if (code.length === 1) return code[0].startsWith('return ') && code[0].includes(auxName);
  if (code.length === 2) {
    const m = py(`(${W}+)${S}*=${S}*${escapeRegExp(auxName)}${S}*\\(`).exec(code[0]);
    return m !== null && code[1] === `return ${m[1]}`;
  }
  return false;
}

/**
 * check_aux_call_without_assignment as written: a line must be exactly `aux<one whitespace>(<one
 * character>)`, so it almost never fires (docs/environments.md "Reference gotchas"). Returns
 * `Line N: <line>` for each hit.
 */
export function referenceIgnoredAuxCalls(main: string, auxName = 'aux'): string[] {
  if (!main?.includes(auxName)) return [];
  const name = escapeRegExp(auxName);
  const call = py(`${name}${S}\\([^)]\\)`);
  const bad = [py(`^${name}${S}\\([^)]\\)$`), py(`^${name}${S}\\([^)]\\);?${S}$`), py(`^${S}${name}${S}\\([^)]\\)${S}*$`)];
  const hits: string[] = [];
  for (const [i, line] of main.split('\n').entries()) {
    const s = pyStrip(line);
    if (!s || s.startsWith('#') || !call.test(s)) continue;
    if (bad.some((p) => p.test(s))) hits.push(`Line ${i + 1}: ${s}`);
  }
  return hits;
}
