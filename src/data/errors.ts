/** Why building the corpus, generating Python tasks or training the tokenizer failed. */
export type DataErrorCode = 'SOURCE_MISSING' | 'SOURCE_FORMAT' | 'PYTHON_MISSING' | 'PYTHON_FAILED' | 'BAD_OPTIONS';

/**
 * A data-pipeline problem tied to one file (a package data file, an output, or the interpreter).
 * The message reads `<file>: <what is wrong> — <what to do>`.
 */
export class DataError extends Error {
  override readonly name = 'DataError';

  constructor(
    readonly code: DataErrorCode,
    readonly file: string,
    problem: string,
    fix: string,
  ) {
    super(`${file}: ${problem} — ${fix}`);
  }
}
