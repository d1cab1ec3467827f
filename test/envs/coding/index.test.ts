/**
 * The coding environments as the trainer and the eval table see them, and a short two-turn MAGRPO
 * run (level_feedback) with tiny code-word models through MAGRPOTrainer (reference backend: no
 * native build needed).
 */
import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setBackend } from '../../../src/engine/runtime.js';
import { type CodingItem, codingEnvironmentFromJsonl, coopPythonEnvironment, humanevalEnvironment } from '../../../src/envs/coding/index.js';
import { auxPrompt, mainPrompt, singleAgentPrompt } from '../../../src/envs/coding/prompts.js';
import { envEntry } from '../../../src/envs/registry.js';
import { TextTokenizer } from '../../../src/model/tokenizer.js';
import { MemorySink } from '../../../src/rl/metrics.js';
import type { TreeNode } from '../../../src/rl/rollout.js';
import { type Formatter, formattersFor, promptText, type RewardFn } from '../../../src/rl/task.js';
import { MAGRPOTrainer } from '../../../src/rl/trainer.js';
import { PythonSandbox } from '../../../src/sandbox/index.js';
import { makeTinyCoder } from './tiny-coder.js';

const sandbox = new PythonSandbox({ concurrency: 2 });
const item: CodingItem = {
  task_id: 'T/0',
  prompt: 'def f(x):\n    """Return x plus one."""\n',
  test: 'def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(4) == 5\n',
  entry_point: 'f',
};
const AUX = 'def aux(x): return x + 1';
const MAIN = 'def f(x):\n    y = aux(x)\n    return y * 1';

describe('environments', () => {
  it('humaneval: paper-era default splits, aux/main formatters, later turns pass the transition prompt through', () => {
    const env = humanevalEnvironment({ sandbox });
    assert.equal(env.numAgents, 2);
    const { train, eval: evalItems } = env.defaultSplits();
    assert.deepEqual([train.length, evalItems.length], [100, 32]);
    const task = env.task();
    const [fa, fm] = task.formatters as Formatter<CodingItem>[];
    assert.equal(fa(train[0]), auxPrompt(train[0]));
    assert.equal(fm(train[0]), mainPrompt(train[0]));
    assert.equal(fm(train[0], 'feedback prompt'), 'feedback prompt');
    assert.deepEqual(
      env.baselines.map((b) => b.name),
      ['single_agent', 'naive_concat', 'sequential_pipeline', 'one_round_discussion'],
    );
  });

  it("prompt_style chat: the paper's prompts and later turns' feedback prompts are the user turn, rendered with the generation prompt", async () => {
    const task = humanevalEnvironment({ sandbox, prompt_style: 'chat' }).task({ train: [item] });
    const [fa, fm] = task.formatters as Formatter<CodingItem>[];
    const user = (content: string) => [{ role: 'user', content }];
    assert.deepEqual(fa(item), user(auxPrompt(item)));
    assert.deepEqual(fm(item), user(mainPrompt(item)));
    assert.deepEqual(fm(item, 'feedback prompt'), user('feedback prompt'));
    assert.ok(task.transition, 'chat teams play the feedback turns as instruct teams do');
    const tokenizer = TextTokenizer.fromDir(join(import.meta.dirname, '../../fixtures/models/tiny-qwen2'));
    assert.equal(tokenizer.renderPrompt(fa(item)), `<|im_start|>user\n${auxPrompt(item)}<|im_end|>\n<|im_start|>assistant\n`);
    const single = humanevalEnvironment({ sandbox, prompt_style: 'chat', num_agents: 1 }).task({ train: [item] });
    assert.deepEqual((single.formatters as Formatter<CodingItem>[])[0](item), user(singleAgentPrompt(item)));
    const entry = envEntry('coop-python');
    assert.ok(entry);
    const env = await entry.load(entry.options.parse({ prompt_style: 'chat' }));
    assert.deepEqual(formattersFor(env.task({ train: [item], eval: [] }), 2)[1](item), user(mainPrompt(item)));
  });

  it('the task reward scores [aux, main]; num_agents 1 scores [main] with aux = ""', async () => {
    const two = humanevalEnvironment({ sandbox }).task({ train: [item] });
    const r2 = await (two.reward as RewardFn<CodingItem>)({ completions: [AUX, MAIN], prompts: ['', ''], item, turn: 0 });
    assert.deepEqual(r2, { reward: 4, components: { structure: 1, syntax: 0.5, tests: 1, cooperation: 1.5, penalty: 0 } });
    const single = humanevalEnvironment({ sandbox, num_agents: 1 });
    const one = single.task({ train: [item] });
    assert.equal((one.formatters as Formatter<CodingItem>[])[0](item), singleAgentPrompt(item));
    const r1 = await (one.reward as RewardFn<CodingItem>)({ completions: ['def f(x): return x + 1'], prompts: [''], item, turn: 0 });
    assert.equal(typeof r1 === 'number' ? r1 : r1.reward, 2.1);
  });

  it('reward options reach the reward: aux_penalty off keeps a standalone aux() call unpunished', async () => {
    const main = 'def f(x):\n    aux(x)\n    return x + 1';
    const score = async (auxPenalty: 'off' | 'fixed') => {
      const task = humanevalEnvironment({ sandbox, aux_penalty: auxPenalty }).task({ train: [item] });
      const r = await (task.reward as RewardFn<CodingItem>)({ completions: [AUX, main], prompts: ['', ''], item, turn: 0 });
      return typeof r === 'number' ? r : r.reward;
    };
    assert.deepEqual([await score('off'), await score('fixed')], [4, 3.5]);
  });

  it('metrics and evalMetrics give the normalised table and pass@k', async () => {
    const env = humanevalEnvironment({ sandbox });
    const full = { structure: 1, syntax: 0.5, tests: 1, cooperation: 1.5, penalty: 0 };
    const table = env.metrics([{ index: 0, completions: [], reward: 4, components: full, responseSeconds: 1, outputTokens: 5 }], []);
    assert.deepEqual(table, { structure: 100, syntax: 100, tests: 100, cooperation: 100, return: 100, 'pass@1': 100, response_s: 1, output_tokens: 5 });
    const task = env.task({ train: [item], eval: [item] });
    const episodes = [0, 1].map((sample) => ({
      item,
      index: 0,
      sample,
      turns: [{ prompts: [], completions: [], reward: 4, components: { ...full, tests: sample } }],
    }));
    const m = await task.evalMetrics?.(episodes);
    assert.deepEqual(m && { tests: m.tests, pass1: m['pass@1'], keys: Object.keys(m).length }, { tests: 50, pass1: 50, keys: 6 });
  });

  it('coop-python ships 400 / 100; a user JSONL file becomes an environment named after it', () => {
    const coop = coopPythonEnvironment({ sandbox }).defaultSplits();
    assert.deepEqual([coop.train.length, coop.eval.length], [400, 100]);
    const file = join(tmpdir(), `mine-${process.pid}.jsonl`);
    writeFileSync(file, `${JSON.stringify(item)}\n`);
    const env = codingEnvironmentFromJsonl(file, { sandbox });
    assert.equal(env.name, `mine-${process.pid}`);
    assert.deepEqual(env.defaultSplits(), { train: [item], eval: [] });
    rmSync(file);
  });
});

describe('MAGRPO, two turns with level_feedback', () => {
  let dirs: string[] = [];
  before(() => {
    setBackend('reference');
    dirs = [makeTinyCoder(11), makeTinyCoder(12)];
  });
  after(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('a run over 2 items with G = 2 completes, logs every reward component per turn and feeds diagnostics to turn 2', async () => {
    const env = coopPythonEnvironment({ sandbox, feedback_mode: 'level_feedback' });
    const task = env.task({ train: [item, { ...item, task_id: 'T/1' }], eval: [] });
    const sink = new MemorySink();
    const roots: TreeNode[] = [];
    const trainer = new MAGRPOTrainer({
      task,
      models: dirs,
      sinks: [sink],
      onTree: ({ root }) => roots.push(root),
      config: {
        num_generations: 2,
        num_turns: 2,
        max_new_tokens: 16,
        num_train_epochs: 1,
        temperature: 1,
        top_k: null,
        top_p: 1,
        early_termination_threshold: null,
        eval_interval: 0,
        logging_steps: 1,
        agent_learning_rate: 1e-3,
      },
    });
    const result = await trainer.train();
    await trainer.close();
    assert.equal(result.items, 2);
    assert.equal(roots.length, 2);
    // Each root has G = 2 children (aligned joint actions), whose prompts are level_feedback diagnostics.
    const child = roots[0].children[0] as TreeNode;
    assert.equal(roots[0].children.length, 2);
    assert.ok(promptText(child.groups[1].prompt).includes('Static and execution diagnostics:'));
    assert.ok(promptText(child.groups[1].prompt).startsWith('History: previous prompts:\n- Turn 1 prompt:\nSolve this coding problem'));
    const logged = new Set(sink.entries.flatMap((e) => Object.keys(e.metrics)));
    for (const turn of [1, 2])
      for (const c of ['structure', 'syntax', 'tests', 'cooperation', 'penalty']) assert.ok(logged.has(`turn_${turn}/reward/${c}`), `turn_${turn}/reward/${c}`);
    assert.ok(logged.has('agent_0/loss') && logged.has('agent_1/loss'));
  });
});
