/**
 * The coding team reward (reference `execution_reward_aux`, docs/environments.md "Coding reward"), max 4.0:
 *
 *   L1 structure   +0.4 aux extracted with `return\s+`; +0.6 main (the entry point) likewise;
 *                  stop if main is missing
 *   L2 syntax      +0.5 if imports + aux + main parses (ast.parse), else stop
 *   L3 tests       + passed/total over the single-line asserts of check() (10 s each, 3 timeouts
 *                  max, globals seeded with math); stop if none were extracted
 *   cooperation    only if ≥ 1 test passed and aux was extracted: +0.5 if main calls aux(, then
 *                  +1.0 if main is not a thin wrapper
 *   penalty        −0.5 if an aux call's value is ignored (checked in the same branch as the bonus,
 *                  as the reference does)
 *
 * Single-agent mode is aux = "": no aux points and no bonus, so the max is 0.6 + 0.5 + 1.0 = 2.1.
 * All code runs in the sandbox; the five level components sum to the reward. Test verdicts are
 * computed outside the process running model code; asserts judged inside it are counted in
 * `tests_low_trust`.
 */
import { extractAsserts, type PythonSandbox, type TestRunResult } from '../../sandbox/index.js';
import { ignoredAuxCalls } from './aux-usage.js';
import {
  callsAux,
  checkFunctionDefinition,
  combineProgram,
  extractSpecificFunction,
  isThinWrapper,
  promptImports,
  referenceIgnoredAuxCalls,
  type ThinWrapperRule,
} from './code-utils.js';
import type { AuxPenaltyMode } from './options.js';

export interface CodeRewardInput {
  /** Raw aux completion ("" in single-agent mode). */
  auxText: string;
  /** Raw main completion. */
  mainText: string;
  /** The item's HumanEval `test` source (`def check(candidate): ...`). */
  test: string;
  entryPoint: string;
  /** The problem prompt; only its import lines are used. */
  prompt: string;
}

export interface CodeRewardOptions {
  /**
   * How "aux called but its value ignored" (−0.5) is detected (options.ts aux_penalty):
   *   fixed      (default) an AST analysis (aux-usage.ts): standalone aux() statements and results
   *              assigned to names that are never read. The reference's regex (below) is a bug that
   *              silently disables the penalty the paper describes, so by default we apply the
   *              penalty as described, with the detector the authors themselves use in level_feedback.
   *   reference  the reference's regex, which only matches a line that is exactly `aux (x)` (one
   *              whitespace, one character); use it to reproduce the paper's numbers.
   *   off        never penalise.
   */
  auxPenalty?: AuxPenaltyMode;
  /** Docstring handling of the thin-wrapper rule (code-utils.ts isThinWrapper). Default 'fixed'. */
  thinWrapper?: ThinWrapperRule;
}

/** The reward split by level; the five levels sum to the reward. */
export interface CodeRewardComponents {
  structure: number;
  syntax: number;
  tests: number;
  cooperation: number;
  penalty: number;
  /**
   * Not a reward part: how many asserts were judged inside the sandbox, where model code could forge
   * their verdicts (runner-judge.ts). Present only when > 0, so it shows up in the logged metrics.
   */
  tests_low_trust?: number;
}

export interface CodeRewardResult {
  reward: number;
  components: CodeRewardComponents;
  /** Level at which scoring stopped early, if it did. */
  stoppedAt: 'structure' | 'syntax' | 'no_tests' | null;
  auxFunction: string;
  mainFunction: string;
  /** imports + aux + main as executed. */
  program: string;
  passed: number;
  total: number;
  /** The sandbox run of the asserts (absent when scoring stopped before L3). */
  run?: TestRunResult;
  /** Ignored aux calls found by the penalty detector (`Line N: ...`). */
  ignoredCalls: string[];
}

/** Maximum of each component: the paper's normalisers (structure 1, syntax 0.5, tests 1, cooperation 1.5, total 4). */
export const COMPONENT_MAX = { structure: 1, syntax: 0.5, tests: 1, cooperation: 1.5, return: 4 } as const;

export async function codeReward(input: CodeRewardInput, sandbox: PythonSandbox, opts: CodeRewardOptions = {}): Promise<CodeRewardResult> {
  const penaltyMode = opts.auxPenalty ?? 'fixed';
  const c: CodeRewardComponents = { structure: 0, syntax: 0, tests: 0, cooperation: 0, penalty: 0 };
  // A running total in the reference's order, so the float matches its reward exactly.
  let total = 0;
  const add = (key: keyof CodeRewardComponents, value: number) => {
    c[key] += value;
    total += value;
  };
  const auxFunction = extractSpecificFunction(input.auxText, 'aux');
  const mainFunction = extractSpecificFunction(input.mainText, input.entryPoint);
  const result = (stoppedAt: CodeRewardResult['stoppedAt'], extra: Partial<CodeRewardResult> = {}): CodeRewardResult => ({
    reward: total,
    components: c,
    stoppedAt,
    auxFunction,
    mainFunction,
    program: '',
    passed: 0,
    total: 0,
    ignoredCalls: [],
    ...extra,
  });

  // L1
  if (checkFunctionDefinition(input.auxText, 'aux', 'Aux function').ok) add('structure', 0.4);
  if (!checkFunctionDefinition(input.mainText, input.entryPoint, `Main function (${input.entryPoint})`).ok) return result('structure');
  add('structure', 0.6);

  // L2 (and L3 in the same sandbox process: runTests parses before it executes)
  const program = combineProgram(auxFunction, mainFunction, promptImports(input.prompt));
  const asserts = extractAsserts(input.test, input.entryPoint);
  if (asserts.length === 0) {
    if (await sandbox.checkSyntax(program)) return result('syntax', { program });
    add('syntax', 0.5);
    return result('no_tests', { program });
  }
  const run = await sandbox.runTests(program, asserts);
  if (run.syntaxError) return result('syntax', { program, run });
  add('syntax', 0.5);

  // L3
  add('tests', (run.passed / run.total) * 1.0);
  if (run.lowTrust > 0) c.tests_low_trust = run.lowTrust;

  // Cooperation and penalty
  let ignoredCalls: string[] = [];
  if (run.passed > 0 && auxFunction && callsAux(mainFunction)) {
    add('cooperation', 0.5);
    if (!isThinWrapper(mainFunction, opts.thinWrapper ?? 'fixed')) add('cooperation', 1.0);
    if (penaltyMode === 'reference') ignoredCalls = referenceIgnoredAuxCalls(mainFunction);
    else if (penaltyMode === 'fixed') ignoredCalls = await ignoredAuxCalls(mainFunction, sandbox);
    if (ignoredCalls.length > 0) add('penalty', -0.5);
  }
  return result(null, { program, run, passed: run.passed, total: run.total, ignoredCalls });
}
