/**
 * Seeded generator of small, correct Python functions in HumanEval format, for the pretraining corpus
 * and for environments that need fresh coding tasks (e.g. a two-agent helper/main split).
 *
 * Each template (see pytemplates-*.ts) draws names, constants, docstring wording and one of several
 * implementations, and computes its test cases' expected outputs in TypeScript. `verifyPyTasks` runs
 * every task's solution against those cases in one Python process, so a task is kept only when the
 * Python and the TypeScript reference agree.
 */
import { PY_KINDS, type PyCase, type PyFnSpec, type PyKind, type PyTemplate } from './pykit.js';
import { COMPOSE_TEMPLATES } from './pytemplates-compose.js';
import { DICT_TEMPLATES } from './pytemplates-dicts.js';
import { LIST_TEMPLATES } from './pytemplates-lists.js';
import { NUMBER_TEMPLATES } from './pytemplates-numbers.js';
import { TEXT_TEMPLATES } from './pytemplates-text.js';
import { type PythonRunOptions, runPythonBatch } from './python.js';
import { pyRepr } from './pyvalue.js';
import { Rng } from './rng.js';

export type { PyKind } from './pykit.js';
export { PY_KINDS } from './pykit.js';

export const PY_TEMPLATES: readonly PyTemplate[] = [...NUMBER_TEMPLATES, ...TEXT_TEMPLATES, ...LIST_TEMPLATES, ...DICT_TEMPLATES, ...COMPOSE_TEMPLATES];

/** A task in HumanEval's shape, plus what a helper/main split needs. */
export interface PyTask {
  task_id: string;
  template: string;
  kind: PyKind;
  /** Helper code (when there is one) followed by the main signature and docstring. */
  prompt: string;
  /** The main function's body, indented, ending in a newline: prompt + this is runnable. */
  canonical_solution: string;
  /** `def check(candidate):` with 2–4 asserts. */
  test: string;
  entry_point: string;
  /** The same cases as plain `assert entry_point(...) == ...` lines. */
  asserts: string[];
  /** The called helper: full code, and its signature + docstring alone (the helper writer's prompt). */
  helper?: { name: string; code: string; prompt: string };
}

export interface GenerateOptions {
  seed: number;
  count: number;
  /** Restrict to these kinds (default: all). */
  kinds?: readonly PyKind[];
}

const INDENT = '    ';

function wrapDoc(text: string, width = 88): string[] {
  const lines: string[] = [];
  let line = '';
  for (const w of text.split(' ')) {
    if (line !== '' && INDENT.length + line.length + 1 + w.length > width) {
      lines.push(line);
      line = w;
    } else line = line === '' ? w : `${line} ${w}`;
  }
  lines.push(line);
  return lines;
}

function signature(fn: PyFnSpec, annotate: boolean): string {
  const params = fn.params.map(([name, type]) => (annotate ? `${name}: ${type}` : name)).join(', ');
  return `def ${fn.name}(${params})${annotate ? ` -> ${fn.returns}` : ''}:`;
}

function indentBody(lines: readonly string[]): string {
  return `${lines.map((l) => (l === '' ? '' : INDENT + l)).join('\n')}\n`;
}

/** Signature plus docstring; with an example, the docstring ends HumanEval-style in `>>>` lines. */
function header(fn: PyFnSpec, annotate: boolean, example?: PyCase): string {
  const doc = wrapDoc(fn.doc);
  if (example === undefined && doc.length === 1) return `${signature(fn, annotate)}\n${INDENT}"""${doc[0]}"""\n`;
  const lines = [`"""${doc[0]}`, ...doc.slice(1)];
  if (example !== undefined) lines.push(`>>> ${call(fn.name, example)}`, pyRepr(example.out));
  lines.push('"""');
  return `${signature(fn, annotate)}\n${lines.map((l) => INDENT + l).join('\n')}\n`;
}

function call(name: string, c: PyCase): string {
  return `${name}(${c.args.map(pyRepr).join(', ')})`;
}

function buildTask(template: PyTemplate, rng: Rng, id: number): PyTask {
  const spec = template.make(rng);
  const annotate = rng.chance(0.5);
  const { main, helper, cases } = spec;
  const helperPart =
    helper === undefined ? undefined : { name: helper.name, prompt: header(helper, annotate), code: header(helper, annotate) + indentBody(helper.body) };
  return {
    task_id: `PyGen/${id}`,
    template: template.id,
    kind: template.kind,
    prompt: (helperPart === undefined ? '' : `${helperPart.code}\n\n`) + header(main, annotate, cases[0]),
    canonical_solution: indentBody(main.body),
    test: `def check(candidate):\n${cases.map((c) => `${INDENT}assert ${call('candidate', c)} == ${pyRepr(c.out)}`).join('\n')}\n`,
    entry_point: main.name,
    asserts: cases.map((c) => `assert ${call(main.name, c)} == ${pyRepr(c.out)}`),
    ...(helperPart === undefined ? {} : { helper: helperPart }),
  };
}

/**
 * `count` tasks with distinct function text (fewer if the templates run out of variety), cycling
 * through the templates of the requested kinds so each kind is represented evenly.
 */
export function generatePyTasks(options: GenerateOptions): PyTask[] {
  const kinds = options.kinds ?? PY_KINDS;
  const templates = PY_TEMPLATES.filter((t) => kinds.includes(t.kind));
  const rng = new Rng(options.seed);
  const seen = new Set<string>();
  const tasks: PyTask[] = [];
  const maxAttempts = options.count * 20;
  for (let attempt = 0; attempt < maxAttempts && tasks.length < options.count && templates.length > 0; attempt++) {
    const task = buildTask(templates[attempt % templates.length], rng, tasks.length);
    const key = task.prompt + task.canonical_solution;
    if (seen.has(key)) continue;
    seen.add(key);
    tasks.push(task);
  }
  return tasks;
}

/** A standalone program that raises if `solution` (default: the canonical one) fails the task. */
export function taskProgram(task: PyTask, solution: string = task.canonical_solution): string {
  return `${task.prompt}${solution}\n\n${task.test}\n\ncheck(${task.entry_point})\n`;
}

/**
 * The task as corpus text: the full program followed by its tests, either as plain asserts or as a
 * HumanEval `check` block. The docstring example stays in, as real code has it.
 */
export function taskCorpusText(task: PyTask, style: 'asserts' | 'check'): string {
  const code = task.prompt + task.canonical_solution;
  const tests = style === 'asserts' ? `${task.asserts.join('\n')}\n` : `${task.test}\n\ncheck(${task.entry_point})\n`;
  return `${code}\n\n${tests}`;
}

export interface VerifyResult {
  passed: PyTask[];
  failed: { task: PyTask; error: string }[];
}

/** Runs every task's canonical solution (check block and plain asserts) in one Python process. */
export function verifyPyTasks(tasks: readonly PyTask[], options: PythonRunOptions = {}): VerifyResult {
  const programs = tasks.map((t) => `${taskProgram(t)}\n${t.asserts.join('\n')}\n`);
  const errors = runPythonBatch(programs, options);
  const result: VerifyResult = { passed: [], failed: [] };
  tasks.forEach((task, i) => {
    const error = errors[i];
    if (error === null) result.passed.push(task);
    else result.failed.push({ task, error });
  });
  return result;
}
