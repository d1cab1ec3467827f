/**
 * Python values as the task generator computes them in TypeScript, and their Python `repr`, so
 * expected outputs can be written into asserts and docstrings exactly as Python would print them.
 * Only exact values: ints, ASCII strings, bools, None, lists, tuples and dicts (no floats, whose
 * printing differs between the languages).
 */
export type PyValue = number | string | boolean | null | PyValue[] | PyTuple | PyDict;
export type PyDict = Map<string | number, PyValue>;

export class PyTuple {
  constructor(readonly items: PyValue[]) {}
}

export function tuple(...items: PyValue[]): PyTuple {
  return new PyTuple(items);
}

/** Python's repr of a str: single quotes unless the text has ' and no ". */
export function pyStr(s: string): string {
  const quote = s.includes("'") && !s.includes('"') ? '"' : "'";
  let out = quote;
  for (const ch of s) {
    const code = ch.codePointAt(0) as number;
    if (ch === '\\') out += '\\\\';
    else if (ch === quote) out += `\\${quote}`;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\t') out += '\\t';
    else if (ch === '\r') out += '\\r';
    else if (code < 0x20 || code === 0x7f) out += `\\x${code.toString(16).padStart(2, '0')}`;
    else out += ch;
  }
  return out + quote;
}

export function pyRepr(v: PyValue): string {
  if (v === null) return 'None';
  if (typeof v === 'boolean') return v ? 'True' : 'False';
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v)) throw new RangeError(`pyRepr: ${v} is not an exact int`);
    return String(v);
  }
  if (typeof v === 'string') return pyStr(v);
  if (Array.isArray(v)) return `[${v.map(pyRepr).join(', ')}]`;
  if (v instanceof PyTuple) {
    return v.items.length === 1 ? `(${pyRepr(v.items[0])},)` : `(${v.items.map(pyRepr).join(', ')})`;
  }
  return `{${[...v].map(([k, x]) => `${pyRepr(k)}: ${pyRepr(x)}`).join(', ')}}`;
}
