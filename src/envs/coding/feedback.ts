/**
 * Multi-turn transitions for the coding team (reference external/*.py; docs/environments.md
 * "Coding multi-turn feedback"). Each mode turns one branch's previous joint action into the
 * next turn's prompts:
 *
 *   plain           previous code + "Revise ... accordingly"
 *   passed          previous code + "All levels passed" / "Not all levels passed"
 *   level_passed    previous code + compact signals (implementation, syntax, tests, aux usage)
 *   level_feedback  full history + static and execution diagnostics + aux-usage notes (default)
 *   expert_edits    first-turn prompt of the role + "Here is the feedback from an expert:" + edits
 *
 * plain / passed / level_passed put the first-turn instructions first when `originalPrompt` is on
 * and the previous extracted function when `previousResponse` is on (both on by default, as the
 * reference training script passes them); level_feedback always carries the whole history of the
 * branch and expert_edits always rebuilds the first-turn prompt, as the reference does.
 *
 * Diagnostics run a slice of the tests (`sandboxSlice`, default 1 = the first assert only), while
 * the reward uses all of them (docs/environments.md "Reference gotchas"). The returned prompts are
 * complete: the environment's formatters pass them through unchanged.
 */

import type { Transition } from '../../rl/task.js';
import { extractAsserts, type PythonSandbox, type SyntaxIssue, type TestRunResult } from '../../sandbox/index.js';
import { ignoredAuxCalls } from './aux-usage.js';
import {
  callsAux,
  checkFunctionDefinition,
  combineProgram,
  extractSpecificFunction,
  isThinWrapper,
  promptImports,
  pyStrip,
  type ThinWrapperRule,
} from './code-utils.js';
import type { CodingItem } from './data.js';
import { type ExpertOptions, expertEdits, resolveExpert } from './expert.js';
import { FEEDBACK_MODES, type FeedbackMode } from './options.js';
import { auxPrompt, mainPrompt, originalInstructions, singleAgentPrompt } from './prompts.js';

export interface FeedbackOptions {
  /** Default 'level_feedback'. */
  mode?: FeedbackMode;
  /** Asserts the diagnostics run: N > 0 the first N, N < 0 the last |N|, 0 or 'all' every one. Default 1. */
  sandboxSlice?: number | 'all';
  /** Re-include the first-turn instructions (plain, passed, level_passed). Default true. */
  originalPrompt?: boolean;
  /** Re-include the previous extracted function (plain, passed, level_passed). Default true. */
  previousResponse?: boolean;
  /** Required for expert_edits (or the MAGRPO_EXPERT_* environment variables). */
  expert?: ExpertOptions;
  /** Docstring handling of the thin-wrapper warning; match the reward's. Default 'fixed'. */
  thinWrapper?: ThinWrapperRule;
}

/** One failing (or passing) sandbox assert as the feedback reports it. */
export interface TestDetail {
  status: 'pass' | 'fail';
  case: string;
  errorType?: string;
  errorMessage?: string;
}

/** Static and dynamic analysis of a joint action (reference analyze_code). */
export interface CodeReport {
  auxFunction: string;
  mainFunction: string;
  auxDefined: boolean;
  auxMessage: string;
  mainDefined: boolean;
  mainMessage: string;
  syntaxOk: boolean;
  syntaxMessage: string;
  syntaxError: { line: number; offset: number; msg: string } | null;
  auxCalled: boolean;
  auxMisused: boolean;
  /** `Line N: reason` for each ignored aux call. */
  problematicCalls: string[];
  isWrapper: boolean;
  testsPassed: number;
  testsTotal: number;
  details: TestDetail[];
}

/** Python's str.splitlines() boundaries. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: these control characters are line breaks to Python
const SPLITLINES = /\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]/;

/**
 * The reference's _make_sliced_assert_tests: keep the first N (or last |N|) lines after
 * `def check(candidate):` that start with `assert` and mention `candidate`, rebuilt as a check().
 */
export function sliceTests(test: string, n: number | 'all'): string {
  if (!pyStrip(test) || n === 'all' || n === 0) return test;
  const lines = test.split(SPLITLINES);
  const checkAt = lines.findIndex((l) => /^\s*def\s+check\s*\(candidate\)\s*:/.test(l));
  const preamble = checkAt < 0 ? lines : lines.slice(0, checkAt);
  const asserts = lines
    .slice(checkAt + 1)
    .map(pyStrip)
    .filter((s) => s.startsWith('assert') && s.includes('candidate'));
  if (asserts.length === 0) return test;
  const selected = n > 0 ? asserts.slice(0, n) : asserts.slice(n);
  const head = pyStrip(preamble.join('\n'));
  return `${[...(head ? [head] : []), 'def check(candidate):', ...selected.map((a) => `    ${a}`)].join('\n')}\n`;
}

interface AnalyzeOptions {
  sandbox: PythonSandbox;
  numAgents: 1 | 2;
  sandboxSlice: number | 'all';
  thinWrapper: ThinWrapperRule;
  /** Run the sliced tests (everything but plain needs them). */
  tests: boolean;
}

/** Reference analyze_code: definitions, syntax, aux usage and the sliced tests of one joint action. */
export async function analyzeCode(item: CodingItem, auxText: string, mainText: string, o: AnalyzeOptions): Promise<CodeReport> {
  const ep = item.entry_point;
  const single = o.numAgents === 1;
  const auxFunction = single ? '' : extractSpecificFunction(auxText, 'aux');
  const mainFunction = extractSpecificFunction(mainText, ep);
  const aux = single ? { ok: false, message: 'Single-agent mode: aux not used' } : checkFunctionDefinition(auxText, 'aux', 'Aux function');
  const main = checkFunctionDefinition(mainText, ep, `Main function (${ep})`);
  const program = combineProgram(auxFunction, mainFunction, promptImports(item.prompt));
  const report: CodeReport = {
    auxFunction,
    mainFunction,
    auxDefined: aux.ok,
    auxMessage: aux.message,
    mainDefined: main.ok,
    mainMessage: main.message,
    syntaxOk: true,
    syntaxMessage: 'Combined code syntax OK',
    syntaxError: null,
    auxCalled: !single && mainFunction !== '' && callsAux(mainFunction),
    auxMisused: false,
    problematicCalls: [],
    isWrapper: !single && mainFunction !== '' && isThinWrapper(mainFunction, o.thinWrapper),
    testsPassed: 0,
    testsTotal: 0,
    details: [],
  };
  if (!o.tests) return report;
  if (report.auxCalled) {
    report.problematicCalls = await ignoredAuxCalls(mainFunction, o.sandbox);
    report.auxMisused = report.problematicCalls.length > 0;
  }
  const asserts = item.test && ep ? extractAsserts(sliceTests(item.test, o.sandboxSlice), ep) : [];
  let issue: SyntaxIssue | null;
  let run: TestRunResult | null = null;
  if (asserts.length === 0) issue = await o.sandbox.checkSyntax(program);
  else {
    run = await o.sandbox.runTests(program, asserts);
    issue = run.syntaxError ?? null;
  }
  if (issue) {
    report.syntaxOk = false;
    // str(SyntaxError) of ast.parse, which names the file "<unknown>".
    report.syntaxMessage = `Combined code has syntax error: ${issue.message} (<unknown>, line ${issue.line})`;
    report.syntaxError = { line: issue.line, offset: issue.col, msg: issue.message };
    return report;
  }
  if (run) Object.assign(report, testDetails(run));
  return report;
}

function testDetails(run: TestRunResult): Pick<CodeReport, 'testsPassed' | 'testsTotal' | 'details'> {
  if (run.loadError) {
    const { type, message } = run.loadError;
    return {
      testsPassed: 0,
      testsTotal: run.total,
      details: run.tests.map((t) => ({ status: 'fail', case: t.source, errorType: type, errorMessage: message })),
    };
  }
  const details: TestDetail[] = [];
  for (const t of run.tests) {
    if (t.skipped) continue;
    if (t.passed) details.push({ status: 'pass', case: t.source });
    else if (t.timedOut) details.push({ status: 'fail', case: t.source, errorType: 'TimeoutException', errorMessage: 'Code execution timed out' });
    else details.push({ status: 'fail', case: t.source, errorType: t.errorType, errorMessage: t.message ?? '' });
  }
  return { testsPassed: run.passed, testsTotal: run.total, details };
}

const mark = (ok: boolean, yes: string, no: string) => (ok ? yes : no);

function diagnostics(r: CodeReport, order: ('aux' | 'main')[]): string[] {
  const lines = ['Static and execution diagnostics:'];
  for (const role of order) {
    if (role === 'aux') lines.push(`- Aux definition: ${mark(r.auxDefined, 'FOUND', 'MISSING')} (${r.auxMessage})`);
    else lines.push(`- Main definition: ${mark(r.mainDefined, 'FOUND', 'MISSING')} (${r.mainMessage})`);
  }
  lines.push(`- Syntax: ${mark(r.syntaxOk, 'OK', 'ERROR')} (${r.syntaxMessage})`);
  if (r.syntaxError) lines.push(`  SyntaxError at line ${r.syntaxError.line}, col ${r.syntaxError.offset}: ${r.syntaxError.msg}`);
  if (r.testsTotal > 0) {
    lines.push(`- Tests: ${r.testsPassed}/${r.testsTotal} passed`);
    for (const d of r.details) if (d.status === 'fail') lines.push(`  Failed case: ${d.case} -> ${d.errorType}: ${d.errorMessage}`);
  } else lines.push('- Tests: no test cases found');
  return lines;
}

function history(prompts: readonly string[], responses: readonly string[], responseTitle: string): string[] {
  const lines: string[] = [];
  if (prompts.length) lines.push('History: previous prompts:', ...prompts.map((p, t) => `- Turn ${t + 1} prompt:\n${p}`), '');
  if (responses.length) lines.push(responseTitle, ...responses.map((p, t) => `- Turn ${t + 1} response:\n${p}`), '');
  return lines;
}

const REVISE_STRICT = 'accordingly. Output ONLY the function code with no extra text.';

/** level_feedback prompts, one per agent. */
export function levelFeedbackPrompts(
  item: CodingItem,
  r: CodeReport,
  numAgents: 1 | 2,
  ph: readonly (readonly string[])[],
  rh: readonly (readonly string[])[],
): string[] {
  const ep = item.entry_point;
  if (numAgents === 1) {
    const main = [...history(ph[0], rh[0], 'History: your previous responses:'), ...diagnostics(r, ['main']), `\nRevise your ${ep}(...) ${REVISE_STRICT}`];
    return [main.join('\n')];
  }
  const aux = [
    ...history(ph[0], rh[0], 'History: your previous aux(...) responses:'),
    ...diagnostics(r, ['aux', 'main']),
    `\nRevise your aux(...) ${REVISE_STRICT}`,
  ];
  const main = [...history(ph[1], rh[1], 'History: your previous main responses:'), ...diagnostics(r, ['main', 'aux'])];
  if (r.mainDefined) {
    if (!r.auxCalled) main.push('- Aux usage: main does NOT call aux');
    else if (r.auxMisused) main.push(`- Aux usage: called but misused (${r.problematicCalls.slice(0, 2).join(', ')})`);
    else main.push('- Aux usage: main calls aux and uses its result');
    if (r.isWrapper) main.push('- Warning: main appears to be a thin wrapper over aux');
  }
  main.push(`\nRevise your ${ep}(...) ${REVISE_STRICT}`);
  return [aux.join('\n'), main.join('\n')];
}

interface Framing {
  originalPrompt: boolean;
  previousResponse: boolean;
}

/** [first-turn instructions, blank] and [previous function, blank] as the flags ask, per agent. */
function framing(item: CodingItem, r: CodeReport, numAgents: 1 | 2, f: Framing): string[][] {
  const base = originalInstructions(item);
  const none = '<no implementation found>';
  if (numAgents === 1) {
    return [[...(f.originalPrompt ? [base.single, ''] : []), ...(f.previousResponse ? ['Your previous implementation:', r.mainFunction || none, ''] : [])]];
  }
  return [
    [...(f.originalPrompt ? [base.aux, ''] : []), ...(f.previousResponse ? ['Your previous aux(...) implementation:', r.auxFunction || none, ''] : [])],
    [...(f.originalPrompt ? [base.main, ''] : []), ...(f.previousResponse ? ['Your previous main implementation:', r.mainFunction || none, ''] : [])],
  ];
}

/** plain prompts. */
export function plainPrompts(item: CodingItem, r: CodeReport, numAgents: 1 | 2, f: Framing): string[] {
  const frames = framing(item, r, numAgents, f);
  const closing = (role: string) => `Revise your ${role}(...) accordingly. Output ONLY the function code.`;
  if (numAgents === 1) return [[...frames[0], closing(item.entry_point)].join('\n')];
  return [[...frames[0], closing('aux')].join('\n'), [...frames[1], closing(item.entry_point)].join('\n')];
}

/** passed prompts: one signal, all levels passed or not. */
export function passedPrompts(item: CodingItem, r: CodeReport, numAgents: 1 | 2, f: Framing): string[] {
  const passedAll = r.syntaxOk && r.mainDefined && r.testsTotal > 0 && r.testsPassed === r.testsTotal;
  const signal = `Signal: ${passedAll ? 'All levels passed' : 'Not all levels passed'}`;
  const closing = (role: string) => `Revise your ${role}(...) if needed. Output ONLY the function code.`;
  const frames = framing(item, r, numAgents, f);
  if (numAgents === 1) return [[...frames[0], signal, '', closing(item.entry_point)].join('\n')];
  return [[...frames[0], signal, '', closing('aux')].join('\n'), [...frames[1], signal, '', closing(item.entry_point)].join('\n')];
}

/** level_passed prompts: compact per-level signals. */
export function levelPassedPrompts(item: CodingItem, r: CodeReport, numAgents: 1 | 2, f: Framing): string[] {
  const syntax = `- Syntax: ${r.syntaxOk ? 'Syntax correct' : 'Syntax not correct'}`;
  const tests = `- Tests: ${
    r.testsTotal === 0
      ? 'No tests found'
      : r.testsPassed === r.testsTotal
        ? 'Passed all tests'
        : r.testsPassed === 0
          ? 'No tests passed'
          : `Passed ${r.testsPassed}/${r.testsTotal} tests`
  }`;
  const impl = (ok: boolean) => `- Implementation: ${ok ? 'OK' : 'No implementation found in required structure'}`;
  const closing = (role: string) => `Revise your ${role}(...) accordingly. Output ONLY the function code.`;
  const frames = framing(item, r, numAgents, f);
  if (numAgents === 1) return [[...frames[0], 'Signals:', impl(r.mainDefined), syntax, tests, '', closing(item.entry_point)].join('\n')];
  const usage = !r.mainDefined
    ? 'Main missing; cannot check aux usage'
    : !r.auxCalled
      ? 'Main does not call aux'
      : r.auxMisused
        ? 'Aux called but result not used properly'
        : 'Aux call present and used';
  return [
    [...frames[0], 'Signals:', impl(r.auxDefined), syntax, tests, '', closing('aux')].join('\n'),
    [...frames[1], 'Signals:', impl(r.mainDefined), syntax, tests, `- Aux usage: ${usage}`, '', closing(item.entry_point)].join('\n'),
  ];
}

/** The role's first-turn prompt, plus the expert's edits when there are any. */
export function withExpertEdits(base: string, edits: string): string {
  return pyStrip(edits) ? `${base}\n\nHere is the feedback from an expert:\n${edits}` : base;
}

/**
 * The trainer transition for one mode. Called once per rollout branch with that branch's own
 * completions and histories; returns one prompt per agent (2, or 1 in single-agent mode).
 */
export function codingTransition(sandbox: PythonSandbox, numAgents: 1 | 2, opts: FeedbackOptions = {}): Transition<CodingItem> {
  const mode = opts.mode ?? 'level_feedback';
  if (!FEEDBACK_MODES.includes(mode)) throw new Error(`feedback.mode: got ${JSON.stringify(mode)}, expected one of ${FEEDBACK_MODES.join(', ')}`);
  const framingFlags = { originalPrompt: opts.originalPrompt ?? true, previousResponse: opts.previousResponse ?? true };
  const analyze = { sandbox, numAgents, sandboxSlice: opts.sandboxSlice ?? 1, thinWrapper: opts.thinWrapper ?? 'fixed', tests: mode !== 'plain' } as const;
  const expert = mode === 'expert_edits' ? resolveExpert(opts.expert) : null;
  return async ({ item, completions, promptHistory, responseHistory }) => {
    if (completions.length !== numAgents) throw new Error(`the coding transition expects ${numAgents} completions, got ${completions.length}`);
    const [auxText, mainText] = numAgents === 1 ? ['', completions[0]] : completions;
    if (expert) {
      const edits = await expertEdits(expert, item, auxText, mainText);
      if (numAgents === 1) return [withExpertEdits(singleAgentPrompt(item), edits.main)];
      return [withExpertEdits(auxPrompt(item), edits.aux), withExpertEdits(mainPrompt(item), edits.main)];
    }
    const report = await analyzeCode(item, auxText, mainText, analyze);
    if (mode === 'level_feedback') return levelFeedbackPrompts(item, report, numAgents, promptHistory, responseHistory);
    if (mode === 'level_passed') return levelPassedPrompts(item, report, numAgents, framingFlags);
    if (mode === 'passed') return passedPrompts(item, report, numAgents, framingFlags);
    return plainPrompts(item, report, numAgents, framingFlags);
  };
}
