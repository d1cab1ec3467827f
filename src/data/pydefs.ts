/**
 * Python function bodies found by indentation alone (no parser: the corpus build reads tens of
 * megabytes of code on a shared 2-core machine), and a normalized form of each body that ignores
 * what does not change a solution: its docstring, comments, blank lines and spacing.
 */

export interface PyDef {
  name: string;
  /** 0-based line of the `def`. */
  line: number;
  /** Normalized body (see normalizeBody). */
  body: string;
}

const DEF = /^([ \t]*)(?:async[ \t]+)?def[ \t]+([A-Za-z_]\w*)[ \t]*\(/;

function indentOf(line: string): number {
  return line.length - line.trimStart().length;
}

/** Index of the line that ends the signature starting at `start` (its brackets close and it ends in `:`). */
function signatureEnd(lines: readonly string[], start: number): number {
  let depth = 0;
  for (let i = start; i < lines.length && i < start + 40; i++) {
    const code = lines[i].replace(/#.*$/, '');
    for (const ch of code) {
      if (ch === '(' || ch === '[' || ch === '{') depth++;
      else if (ch === ')' || ch === ']' || ch === '}') depth--;
    }
    if (depth <= 0 && code.trimEnd().endsWith(':')) return i;
    // A one-line def (`def f(x): return x`): the body is on the signature line.
    if (depth <= 0 && /\)\s*(->[^:]*)?:\s*\S/.test(code)) return i;
  }
  return start;
}

const DOCSTRING_START = /^[rRuUbB]?("""|''')/;

/** The line without a trailing `# comment` (a `#` inside a one-line string literal stays). */
function stripComment(line: string): string {
  let quote = '';
  for (let i = 0; i < line.length; i++) {
    const ch = line[i];
    if (quote !== '') {
      if (ch === '\\') i++;
      else if (ch === quote) quote = '';
    } else if (ch === '"' || ch === "'") quote = ch;
    else if (ch === '#') return line.slice(0, i).trimEnd();
  }
  return line;
}

/**
 * A body's statements without the leading docstring, comment-only lines and blank lines, each
 * line stripped of its spacing and trailing comment-free whitespace, joined with `\n`. Indentation
 * depth is dropped too: bodies that differ only in layout normalize to the same text.
 */
export function normalizeBody(bodyLines: readonly string[]): string {
  const lines = bodyLines.map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'));
  let at = 0;
  const doc = lines.length > 0 ? DOCSTRING_START.exec(lines[0]) : null;
  if (doc !== null) {
    const quote = doc[1];
    const rest = lines[0].slice(doc[0].length);
    if (rest.includes(quote)) at = 1;
    else {
      at = 1;
      while (at < lines.length && !lines[at].includes(quote)) at++;
      at++;
    }
  }
  return lines
    .slice(at)
    .map((l) => stripComment(l).replace(/\s+/g, ' '))
    .join('\n');
}

/** Every function (nested ones too) defined in `code`, with its normalized body. */
export function pythonDefs(code: string): PyDef[] {
  const lines = code.split('\n');
  const out: PyDef[] = [];
  for (let i = 0; i < lines.length; i++) {
    const m = DEF.exec(lines[i]);
    if (m === null) continue;
    const indent = m[1].length;
    const end = signatureEnd(lines, i);
    const inline = lines[end].replace(/^.*?\)\s*(->[^:]*)?:/, '').trim();
    const body: string[] = inline !== '' && !inline.startsWith('#') ? [inline] : [];
    let j = end + 1;
    for (; j < lines.length; j++) {
      const l = lines[j];
      if (l.trim() !== '' && indentOf(l) <= indent) break;
      body.push(l);
    }
    out.push({ name: m[2], line: i, body: normalizeBody(body) });
  }
  return out;
}
