/**
 * prompt_style: completion for the writing environments (src/envs/writing/completion-prompts.ts):
 * every prompt is the source text followed by the opening of the paragraph to write, the baselines
 * follow the same style, an empty source gives the paper's error string, and the registry option
 * selects it (and names a bad value).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { envEntry } from '../../../src/envs/registry.js';
import { ARXIV_COMPLETION, TLDR_COMPLETION } from '../../../src/envs/writing/completion-prompts.js';
import { arxivEnvironment, tldrEnvironment } from '../../../src/envs/writing/index.js';
import type { Formatter, Task } from '../../../src/rl/task.js';

/** Agent i's prompt for `item` from a task's formatters (a list for the writing tasks). */
const promptOf = <I>(task: Task<I>, i: number, item: I) => (task.formatters as readonly Formatter<I>[])[i](item, undefined);

const POST = 'SOURCE: Brown Corpus\n\nPOST: The ship left the harbour at dawn.';

describe('writing completion prompts', () => {
  it('agents continue the source text from the opening of their paragraph', () => {
    const [a, b] = TLDR_COMPLETION.formatters;
    assert.equal(a(POST), `${POST}\n\nIn short,`);
    assert.equal(b(POST), `${POST}\n\nIn other words,`);
    const [c, d] = ARXIV_COMPLETION.formatters;
    assert.equal(c('We study X.'), 'We study X.\n\nBackground.');
    assert.equal(d('We study X.'), 'We study X.\n\nMethods and implications.');
  });

  it('baselines: the sequential agent and the discussion read the other paragraph with its opening', () => {
    const p = TLDR_COMPLETION.baselines;
    assert.equal(p.single(POST), `${POST}\n\nIn other words,`);
    assert.equal(p.sequential[1](POST, 'it sailed.'), `${POST}\n\nIn short, it sailed.\n\nIn other words,`);
    assert.equal(p.discussRound2[0](POST, 'the ship sailed away at dawn.'), `${POST}\n\nIn other words, the ship sailed away at dawn.\n\nIn short,`);
    assert.equal(p.discussRound2[1](POST, 'it sailed.'), `${POST}\n\nIn short, it sailed.\n\nIn other words,`);
    assert.deepEqual(p.fallbackRatio, [2.0, 3.0]);
    assert.deepEqual(ARXIV_COMPLETION.baselines.fallbackRatio, [1.0, 1.3]);
  });

  it('an empty source gives the error string of the paper prompts', () => {
    assert.equal(TLDR_COMPLETION.formatters[0](''), 'Error: No prompt provided.');
    assert.equal(ARXIV_COMPLETION.formatters[1](''), 'Error: No abstract provided.');
  });

  it('the environments use them when asked, and keep the paper prompts by default', () => {
    const item = { prompt: POST };
    const paper = tldrEnvironment().task({ train: [item], eval: [] });
    const base = tldrEnvironment({ prompt_style: 'completion' }).task({ train: [item], eval: [] });
    assert.match(promptOf(paper, 0, item) as string, /IMPORTANT INSTRUCTIONS/);
    assert.equal(promptOf(base, 0, item), `${POST}\n\nIn short,`);
    assert.equal(promptOf(base, 1, item), `${POST}\n\nIn other words,`);
    const arxiv = arxivEnvironment({ prompt_style: 'completion' }).task({ train: [{ abstract_text: 'We study X.' }], eval: [] });
    assert.equal(promptOf(arxiv, 0, { abstract_text: 'We study X.' }), 'We study X.\n\nBackground.');
    assert.throws(
      () => tldrEnvironment({ prompt_style: 'dialogue' as 'completion' }),
      /invalid tldr options:\n {2}prompt_style: got "dialogue", expected one of "instruct", "chat", "completion"/,
    );
  });

  it('the registry option prompt_style selects the style and names a bad value', async () => {
    const entry = envEntry('tldr');
    assert.ok(entry);
    const options = entry.options.parse({ prompt_style: 'completion' });
    const task = (await entry.load(options)).task({ train: [{ prompt: POST }], eval: [] });
    assert.equal(promptOf(task, 1, { prompt: POST }), `${POST}\n\nIn other words,`);
    assert.equal(entry.options.parse({}).prompt_style, 'instruct');
    const bad = entry.options.safeParse({ prompt_style: 'dialogue' });
    assert.equal(bad.success, false);
    assert.match(JSON.stringify(bad.error?.issues), /prompt_style/);
  });
});
