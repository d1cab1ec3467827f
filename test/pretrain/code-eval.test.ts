import assert from 'node:assert/strict';
import { test } from 'node:test';
import { generatePyTasks } from '../../src/data/pyfuncs.js';
import type { LanguageModel, TextSampleOptions } from '../../src/model/pretrained.js';
import { continuesBody, evaluateCode, heldOutTasks, promptText, taskHeadline } from '../../src/pretrain/code-eval.js';

test('the model continues the prompt without its final newline', () => {
  const [t] = generatePyTasks({ seed: 3, count: 1 });
  assert.ok(t.prompt.endsWith('"""\n'));
  assert.equal(promptText(t), t.prompt.slice(0, -1));
});

test('continuesBody: the first non-blank line must be indented', () => {
  assert.equal(continuesBody('    return x\n'), true);
  assert.equal(continuesBody('\n\n\treturn x'), true);
  assert.equal(continuesBody('assertdefdef'), false);
  assert.equal(continuesBody('  \n'), false);
  assert.equal(continuesBody(''), false);
});

test('held-out tasks share neither prompt nor headline with the training text', () => {
  const candidates = generatePyTasks({ seed: 11, count: 12 });
  const train = `${candidates[0].prompt}\n...\n${taskHeadline(candidates[1])}\n`;
  const held = heldOutTasks(train, 5, 11);
  assert.equal(held.tasks.length, 5);
  assert.equal(held.skippedOverlap, 2);
  for (const t of held.tasks) {
    assert.ok(!train.includes(t.prompt) && !train.includes(taskHeadline(t)), t.task_id);
  }
  assert.deepEqual(
    held.tasks.map((t) => t.task_id),
    candidates.slice(2, 7).map((t) => t.task_id),
  );
  const short = heldOutTasks('', 3, 11, (t) => t.prompt.length < 120);
  assert.ok(short.skippedLength > 0);
  assert.ok(short.tasks.every((t) => t.prompt.length < 120));
});

/** A stand-in model that answers every held-out prompt with a fixed completion function. */
function stubModel(answer: (prompt: string) => string): LanguageModel {
  const stub = {
    tokenizer: { bosId: 0, decode: () => '<|bos|>' },
    model: { maxPositions: 4096 },
    encode: (text: string) => Array.from(text, () => 1),
    sample: (prompts: readonly string[], _o: TextSampleOptions) => prompts.map((p) => ({ text: answer(p.replace('<|bos|>', '')) })),
  };
  return stub as unknown as LanguageModel;
}

test('evaluateCode: canonical solutions parse and pass in the sandbox, junk does neither', async () => {
  const opts = { count: 6, seed: 21, maxNewTokens: 64, temperature: 0 };
  // The model sees the prompt without its final newline, so a correct answer starts with one.
  const solutions = new Map(generatePyTasks({ seed: 21, count: 48 }).map((t) => [promptText(t), `\n${t.canonical_solution}`]));
  const good = await evaluateCode(
    stubModel((p) => solutions.get(p) ?? ''),
    '',
    opts,
  );
  assert.equal(good.tasks, 6);
  assert.equal(good.parse_rate, 1);
  assert.equal(good.pass_rate, 1);
  // A completion that parses but is wrong, and one that does not parse.
  for (const [text, parse, pass] of [
    ['\n    return None\n', 1, 0],
    ['\nassertdefdef ((\n', 0, 0],
  ] as const) {
    const r = await evaluateCode(
      stubModel(() => text),
      '',
      opts,
    );
    assert.deepEqual([r.parse_rate, r.pass_rate, r.completions.length], [parse, pass, 6]);
  }
});
