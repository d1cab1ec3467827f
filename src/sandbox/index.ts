/** Sandboxed Python execution for the coding rewards. */
export { type OptionIssue, SandboxError, type SandboxErrorCode } from './errors.js';
export { extractAsserts } from './extract-asserts.js';
export type { IsolationLevel, IsolationReport } from './isolation.js';
export type { NetworkMode, ResolvedOptions, SandboxOptions } from './options.js';
export {
  type KillReason,
  PythonSandbox,
  type RunResult,
  SANDBOX_UID_BASE,
  type SandboxInfo,
  type SyntaxIssue,
  sandboxIsolation,
  type TestOutcome,
  type TestRunResult,
} from './python-sandbox.js';
