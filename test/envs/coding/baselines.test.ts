/**
 * The coding baselines: wiring with a tiny random model (shapes, token counts, prompts each agent
 * saw), and exact scores with a scripted model that always answers the same code.
 */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { setBackend } from '../../../src/engine/runtime.js';
import { codingBaselines } from '../../../src/envs/coding/baselines.js';
import type { CodingItem } from '../../../src/envs/coding/data.js';
import { CHAT, CODE, INSTRUCT, type PromptStyle } from '../../../src/envs/coding/prompt-style.js';
import type { InferenceSampling } from '../../../src/envs/environment.js';
import { LanguageModel, type TextSample } from '../../../src/model/pretrained.js';
import { type Prompt, promptText } from '../../../src/rl/task.js';
import { PythonSandbox } from '../../../src/sandbox/index.js';
import { makeTinyCoder } from './tiny-coder.js';

const items: CodingItem[] = [0, 1].map((i) => ({
  task_id: `T/${i}`,
  prompt: 'def f(x):\n    """Return x plus one."""\n',
  test: 'def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(4) == 5\n',
  entry_point: 'f',
}));
const sampling: InferenceSampling = { maxNewTokens: 8, temperature: 1, topK: null, topP: 1, seed: 3 };
const baselines = codingBaselines(new PythonSandbox({ concurrency: 2 }));
const byName = (name: string) => baselines.find((b) => b.name === name) ?? assert.fail(name);

/** Records the prompts of every call, then delegates. */
function recording(lm: Pick<LanguageModel, 'sample'>, seen: string[][]): LanguageModel {
  const sample = (prompts: readonly string[], opts: Parameters<LanguageModel['sample']>[1]) => {
    seen.push([...prompts]);
    return lm.sample(prompts, opts);
  };
  return { sample } as unknown as LanguageModel;
}

/** Answers every prompt with `answer(prompt)` (one "token" per character). */
function scripted(answer: (prompt: string) => string): LanguageModel {
  const sample = (prompts: readonly string[]): TextSample[] =>
    prompts.map((p) => {
      const text = answer(p);
      return { promptIds: [], completionIds: [...text].map(() => 1), text, logprobs: [], finishReason: 'eos' } as unknown as TextSample;
    });
  return { sample } as unknown as LanguageModel;
}

let dir = '';
let lm: LanguageModel;
before(() => {
  setBackend('reference');
  dir = makeTinyCoder(5);
  lm = LanguageModel.load(dir);
});
after(() => rmSync(dir, { recursive: true, force: true }));

describe('wiring with a tiny model', () => {
  it('lists the four reference baselines', () => {
    assert.deepEqual(
      baselines.map((b) => [b.name, b.numModels]),
      [
        ['single_agent', 1],
        ['naive_concat', 2],
        ['sequential_pipeline', 2],
        ['one_round_discussion', 2],
      ],
    );
  });

  for (const name of ['single_agent', 'naive_concat', 'sequential_pipeline', 'one_round_discussion']) {
    it(`${name}: one scored episode per item, tokens and time counted`, async () => {
      const seen: string[][] = [];
      const b = byName(name);
      const models = Array.from({ length: b.numModels }, () => recording(lm, seen));
      const results = await b.run(items, models, sampling);
      assert.deepEqual(
        results.map((r) => r.index),
        [0, 1],
      );
      const calls = { single_agent: 1, naive_concat: 2, sequential_pipeline: 2, one_round_discussion: 4 }[name] as number;
      assert.equal(seen.length, calls);
      for (const r of results) {
        assert.equal(r.completions.length, b.numModels);
        assert.deepEqual(Object.keys(r.components).sort(), ['cooperation', 'penalty', 'structure', 'syntax', 'tests']);
        const sum = Object.values(r.components).reduce((a, x) => a + x, 0);
        assert.ok(Math.abs(r.reward - sum) < 1e-9);
        assert.ok(r.outputTokens > 0 && r.outputTokens <= calls * sampling.maxNewTokens);
        assert.ok(r.responseSeconds > 0);
      }
      if (name === 'sequential_pipeline') assert.ok(seen[1][0].includes(`already been implemented:\n\n${results[0].completions[0]}\n\nIMPORTANT`));
      if (name === 'one_round_discussion') {
        assert.ok(seen[2][0].startsWith("Improve your helper function based on how it's being used by the main function."));
        assert.ok(seen[3][0].startsWith('Improve your main function implementation based on the helper function provided.'));
      }
    });
  }
});

describe('scores with a scripted model', () => {
  const AUX = 'def aux(x):\n    return x + 1';
  const MAIN = 'def f(x):\n    y = aux(x)\n    return y * 1';
  const team = scripted((p) => (p.startsWith('Create a helper') || p.startsWith('Improve your helper') ? `\n${AUX}\n` : `\n${MAIN}\n`));

  it('naive_concat, sequential_pipeline and one_round_discussion reach 4.0 with a cooperating pair', async () => {
    for (const name of ['naive_concat', 'sequential_pipeline', 'one_round_discussion']) {
      const results = await byName(name).run(items, [team, team], sampling);
      assert.deepEqual(
        results.map((r) => r.reward),
        [4, 4],
        name,
      );
      assert.deepEqual(results[0].completions, [AUX, MAIN]);
    }
  });

  it('single_agent is scored with aux = "" (a correct solution gets 2.1)', async () => {
    const solo = scripted(() => 'def f(x):\n    return x + 1');
    const [r] = await byName('single_agent').run(items.slice(0, 1), [solo], sampling);
    assert.equal(r.reward, 2.1);
    assert.deepEqual(r.completions, ['def f(x):\n    return x + 1']);
  });
});

describe('chat prompt style (instruction-tuned models)', () => {
  it('every baseline sends the instruct prompts, each as the user turn, and scores alike', async () => {
    const AUX = 'def aux(x):\n    return x + 1';
    const MAIN = 'def f(x):\n    y = aux(x)\n    return y * 1';
    const run = async (style: PromptStyle) => {
      const sent: Prompt[] = [];
      const team = {
        sample: (prompts: readonly Prompt[]): TextSample[] =>
          prompts.map((p) => {
            sent.push(p);
            const helper = /^(Create a|Improve your) helper/.test(promptText(p));
            return { promptIds: [], completionIds: [1], text: `\n${helper ? AUX : MAIN}\n`, logprobs: [], finishReason: 'stop_token' };
          }),
      } as unknown as LanguageModel;
      const rewards: number[] = [];
      for (const b of codingBaselines(new PythonSandbox({ concurrency: 2 }), {}, style))
        rewards.push(...(await b.run(items, [team, team], sampling)).map((r) => r.reward));
      return { sent, rewards };
    };
    const instruct = await run(INSTRUCT);
    const chat = await run(CHAT);
    assert.equal(chat.sent.length, items.length * (1 + 2 + 2 + 4));
    assert.deepEqual(
      chat.sent,
      instruct.sent.map((p) => [{ role: 'user', content: p }]),
    );
    assert.deepEqual(chat.rewards, instruct.rewards);
    assert.deepEqual(chat.rewards.slice(2), [4, 4, 4, 4, 4, 4]);
  });
});

describe('code prompt style (base models continue a source file)', () => {
  const code = codingBaselines(new PythonSandbox({ concurrency: 2 }), {}, CODE);
  const run = (name: string, models: LanguageModel[]) => (code.find((b) => b.name === name) ?? assert.fail(name)).run(items, models, sampling);
  const AUX = 'def aux(x):\n    return x + 1';
  const MAIN = `${items[0].prompt.trimEnd()}\n    y = aux(x)\n    return y * 1`;
  // Replies continue the prompt: aux after "def aux(", main after the docstring.
  const team = (seen: string[]) =>
    scripted((p) => {
      seen.push(p);
      return p.endsWith('def aux(') ? 'x):\n    return x + 1\n\n\nassert aux(1) == 2' : '\n    y = aux(x)\n    return y * 1\n';
    });

  it("every two-agent baseline rebuilds each agent's code from its opening and reaches 4.0", async () => {
    for (const name of ['naive_concat', 'sequential_pipeline', 'one_round_discussion']) {
      const seen: string[] = [];
      const results = await run(name, [team(seen), team(seen)]);
      assert.deepEqual(
        results.map((r) => r.reward),
        [4, 4],
        name,
      );
      assert.equal(results[0].completions[1], MAIN);
      assert.ok(results[0].completions[0].startsWith(AUX));
      if (name !== 'naive_concat') {
        // main saw aux's function (not the assert after it) right above its signature
        assert.ok(
          seen.some((p) => p.includes(`${AUX}\n\n\ndef f(x):`) && !p.includes('assert aux')),
          name,
        );
      }
      if (name === 'one_round_discussion') assert.ok(seen.some((p) => p.startsWith(`${MAIN}\n\n\n# Helper for f(x)`)));
    }
  });

  it('single_agent continues the problem prompt alone', async () => {
    const [r] = await (code.find((b) => b.name === 'single_agent') ?? assert.fail()).run(items.slice(0, 1), [scripted(() => '\n    return x + 1')], sampling);
    assert.equal(r.reward, 2.1);
    assert.equal(r.completions[0], `${items[0].prompt.trimEnd()}\n    return x + 1`);
  });
});
