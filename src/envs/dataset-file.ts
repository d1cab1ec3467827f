/**
 * Reads a dataset file's text for the environments' loaders, refusing what would otherwise crash
 * or silently corrupt items: files (or gzip contents) too large to hold as one string, invalid
 * UTF-8 (which Node would turn into U+FFFD without a word), and single rows of absurd length.
 */
import { readFileSync, statSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';

/** Largest dataset text accepted, compressed or not (V8 strings stop at about 512 MiB). */
export const MAX_DATASET_BYTES = 256 << 20;
/** Largest single line (JSONL row or CSV record start to end); real rows are a few KiB. */
export const MAX_ROW_BYTES = 8 << 20;

/** Why a dataset file cannot be read: the 1-based line when known, and what to do. */
export interface DatasetTextProblem {
  line: number | null;
  problem: string;
  fix: string;
}

/** The file's UTF-8 text (BOM removed, `.gz` inflated), or the first problem with it. */
export function readDatasetText(file: string): { text: string } | DatasetTextProblem {
  const size = statSync(file).size;
  if (size > MAX_DATASET_BYTES) return { line: null, problem: `file is ${size} bytes, more than ${MAX_DATASET_BYTES}`, fix: 'split it into smaller files' };
  let bytes: Buffer = readFileSync(file);
  if (file.endsWith('.gz')) {
    try {
      bytes = gunzipSync(bytes, { maxOutputLength: MAX_DATASET_BYTES });
    } catch (e) {
      const tooBig = (e as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE';
      return {
        line: null,
        problem: tooBig ? `inflates to more than ${MAX_DATASET_BYTES} bytes` : `not valid gzip (${(e as Error).message})`,
        fix: tooBig ? 'split it into smaller files' : 'recompress it, or drop the .gz suffix if it is plain text',
      };
    }
  }
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    const at = firstInvalidUtf8(bytes);
    const line = bytes.subarray(0, at).filter((b) => b === 0x0a).length + 1;
    return { line, problem: `invalid UTF-8 at byte ${at}`, fix: 're-save the file as UTF-8' };
  }
  let start = 0;
  for (let line = 1; start <= text.length; line++) {
    const end = text.indexOf('\n', start);
    const stop = end === -1 ? text.length : end;
    if (stop - start > MAX_ROW_BYTES)
      return { line, problem: `line is ${stop - start} characters, more than ${MAX_ROW_BYTES}`, fix: 'shorten or drop this row' };
    if (end === -1) break;
    start = end + 1;
  }
  return { text: text.replace(/^\uFEFF/, '') };
}

/** Byte offset of the first invalid UTF-8 sequence (decoding a growing prefix would be quadratic). */
function firstInvalidUtf8(b: Uint8Array): number {
  for (let i = 0; i < b.length; ) {
    const c = b[i];
    const n = c < 0x80 ? 1 : c >= 0xc2 && c < 0xe0 ? 2 : c >= 0xe0 && c < 0xf0 ? 3 : c >= 0xf0 && c < 0xf5 ? 4 : 0;
    if (n === 0 || i + n > b.length) return i;
    try {
      new TextDecoder('utf-8', { fatal: true }).decode(b.subarray(i, i + n));
    } catch {
      return i;
    }
    i += n;
  }
  return b.length;
}
