/** What went wrong, as a stable code callers can branch on. */
export type SandboxErrorCode =
  | 'BAD_OPTIONS' // constructor options failed validation (see `issues`)
  | 'NO_ISOLATION' // no launcher could run the interpreter in the requested network mode
  | 'SPAWN_FAILED' // the OS refused to start the launcher (e.g. ENOENT)
  | 'CONFINE_FAILED' // the worker could not apply its limits or drop its uid; nothing user-written ran
  | 'RUNNER_FAILED'; // a batch syntax check ended before answering every program

/** One problem with one option, reported by path so all of them can be fixed in one pass. */
export interface OptionIssue {
  path: string;
  message: string;
}

/** Error raised by the sandbox itself (never for errors in the user's program, which are results). */
export class SandboxError extends Error {
  override readonly name = 'SandboxError';

  constructor(
    readonly code: SandboxErrorCode,
    message: string,
    readonly issues: OptionIssue[] = [],
    /** The interpreter or launcher involved, when the problem is about a file. */
    readonly file?: string,
  ) {
    super(message);
  }
}
