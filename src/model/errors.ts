/** Why a Hugging Face-format model folder could not be read or written. */
export type CheckpointErrorCode =
  | 'FILE_MISSING'
  | 'CORRUPT'
  | 'TRUNCATED'
  | 'UNSUPPORTED_DTYPE'
  | 'UNKNOWN_ARCHITECTURE'
  | 'UNSUPPORTED_FEATURE'
  | 'BAD_CONFIG'
  | 'MISSING_TENSOR'
  | 'SHAPE_MISMATCH'
  | 'TOKENIZER_MISSING'
  | 'NO_CHAT_TEMPLATE';

/**
 * A checkpoint problem tied to one file. The message reads
 * `<file>: <what is wrong> — <what to do>` so it can be acted on without reading code.
 */
export class CheckpointError extends Error {
  override readonly name = 'CheckpointError';

  constructor(
    readonly code: CheckpointErrorCode,
    readonly file: string,
    problem: string,
    fix: string,
  ) {
    super(`${file}: ${problem} — ${fix}`);
  }
}
