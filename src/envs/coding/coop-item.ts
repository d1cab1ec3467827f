/**
 * A generated helper + main task (src/data/pyfuncs.ts, kind "compose") as a coop-python problem:
 * the prompt keeps only the main function's signature and docstring, and the known-good team answer
 * renames the helper `aux`. Shared by the coop-python data set (scripts/build-coding-data.ts) and the
 * code stage of pretraining (scripts/build-code-stage-data.ts), so both write the same team form.
 */
import type { PyTask } from '../../data/pyfuncs.js';
import type { CodingItem } from './data.js';

const indent = (code: string) =>
  code
    .split('\n')
    .map((l) => (l === '' ? '' : `    ${l}`))
    .join('\n');
const rename = (code: string, from: string, to: string) => code.replace(new RegExp(`\\b${from}\\b`, 'g'), to);

export type CoopItem = CodingItem & { template: string; aux_solution: string; main_solution: string; canonical_solution: string };

/** The coop-python problem of a compose task (an error for a task without a helper). */
export function toCoopItem(task: PyTask, id: number): CoopItem {
  const helper = task.helper;
  if (!helper) throw new Error(`${task.task_id} (${task.template}) has no helper`);
  const at = task.prompt.indexOf(`def ${task.entry_point}(`);
  const prompt = task.prompt.slice(at);
  return {
    task_id: `CoopPython/${id}`,
    prompt,
    canonical_solution: indent(helper.code) + task.canonical_solution,
    test: task.test,
    entry_point: task.entry_point,
    aux_solution: rename(helper.code, helper.name, 'aux'),
    main_solution: prompt + rename(task.canonical_solution, helper.name, 'aux'),
    template: task.template,
  };
}
