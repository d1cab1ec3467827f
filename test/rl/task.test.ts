/** Formatters that return chat messages (TRL's conversational prompts), on tiny models with a ChatML template. */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { setBackend } from '../../src/engine/runtime.js';
import { LanguageModel } from '../../src/model/pretrained.js';
import type { LocalAgent } from '../../src/rl/agent-pool.js';
import type { ForwardBackwardResult, LossSample } from '../../src/rl/learner.js';
import { MemorySink } from '../../src/rl/metrics.js';
import type { TreeNode } from '../../src/rl/rollout.js';
import { type ChatMessage, type EvalEpisode, promptText, type Task, TaskError, type TransitionInput } from '../../src/rl/task.js';
import { MAGRPOTrainer } from '../../src/rl/trainer.js';
import { makeTinyModel, WORDS } from '../helpers/tiny-model.js';

type Item = { prompt: string };
const user = (content: string): ChatMessage[] => [{ role: 'user', content }];
// Vocabulary of makeTinyModel({chat: true}): <eos> 0, WORDS 1–9, <|im_start|> 10, <|im_end|> 11, system 12, user 13, assistant 14.
const [GO, A, IM_START, IM_END, USER, ASSISTANT] = [1, 2, 10, 11, 13, 14];
/** "<|im_start|>user\ngo a<|im_end|>\n<|im_start|>assistant\n": the template's tokens, and no BOS added on top. */
const GO_A_CHAT = [IM_START, USER, GO, A, IM_END, IM_START, ASSISTANT];
const base = { temperature: 1, top_k: null, top_p: 1, eval_interval: 0, logging_steps: 1, early_termination_threshold: null } as const;

let chat = '';
let plain = '';
before(() => {
  setBackend('native');
  assert.equal(WORDS.length, 9);
  chat = makeTinyModel({ chat: true, seed: 4 });
  plain = makeTinyModel({ seed: 4 });
});
after(() => {
  rmSync(chat, { recursive: true, force: true });
  rmSync(plain, { recursive: true, force: true });
});

const close = (a: readonly number[], b: readonly number[]) => a.length === b.length && a.every((x, t) => Math.abs(x - b[t]) < 1e-4);

describe('a formatter returning chat messages', () => {
  it('sampling, reference scoring and the learner see the same prompt ids: the template with the generation prompt', async () => {
    const task: Task<Item> = { dataset: [{ prompt: 'go a' }], formatters: (item) => user(item.prompt), reward: ({ completions }) => completions[0].length };
    const t = new MAGRPOTrainer({
      task,
      model: chat,
      config: { ...base, num_generations: 4, max_new_tokens: 4, rollout_buffer_size: 1, fluency_metrics: true, agent_learning_rate: 0.01 },
    });
    const sampled: number[][] = [];
    const learned: { samples: LossSample[]; result: ForwardBackwardResult }[] = [];
    for (const handle of t.agents) {
      const agent = (handle as LocalAgent).agent;
      const sample = agent.lm.sample.bind(agent.lm);
      agent.lm.sample = (prompts, opts) => {
        const out = sample(prompts, opts);
        sampled.push(...out.map((s) => s.promptIds));
        return out;
      };
      const forwardBackward = agent.learner.forwardBackward.bind(agent.learner);
      agent.learner.forwardBackward = async (samples) => {
        const result = await forwardBackward(samples);
        learned.push({ samples, result });
        return result;
      };
    }
    const root = await t.trainStep(task.dataset[0]);
    await t.close();
    assert.equal(sampled.length, 2 * 4);
    for (const ids of sampled) assert.deepEqual(ids, GO_A_CHAT);
    for (const g of root.groups) {
      assert.deepEqual(g.promptIds, GO_A_CHAT);
      // The reference is the starting model: it scores each sampled token exactly as the sampler did
      // only if it read the same prompt.
      for (const [k, c] of g.completions.entries()) assert.ok(close(c.logprobs, g.refLogprobs?.[k] ?? []), `reference log-probs of completion ${k}`);
    }
    assert.equal(learned.length, 2, 'one optimizer step per agent');
    for (const { samples, result } of learned) {
      assert.deepEqual(
        samples.map((s) => s.promptIds),
        [GO_A_CHAT],
      );
      // Before its first step the learner's log-probs are the sampler's.
      for (const [k, old] of samples[0].oldLogprobs.entries()) assert.ok(close(result.logprobs[0][k], old), `learner log-probs of completion ${k}`);
    }
    assert.deepEqual(root.rawPrompts, ['go a', 'go a']);
  });

  it('trains end to end over two turns, in worker threads: gradients flow, metrics are logged, callbacks see text', async () => {
    const seen: TransitionInput<Item>[] = [];
    const rewardPrompts: string[][] = [];
    const task: Task<Item> = {
      dataset: [{ prompt: 'go a' }, { prompt: 'go b' }],
      evalDataset: [{ prompt: 'go c' }],
      formatters: [(item, external) => [{ role: 'system', content: 'a' }, ...user(external ?? item.prompt)], (item, external) => user(external ?? item.prompt)],
      reward: ({ completions, prompts }) => {
        rewardPrompts.push([...prompts]);
        return completions[0] === completions[1] ? 1 : completions[0].length / 10;
      },
      transition: (input) => {
        seen.push(input);
        return input.completions.map((c) => `go ${c}`);
      },
    };
    const sink = new MemorySink();
    let episodes: EvalEpisode<Item>[] = [];
    const roots: TreeNode[] = [];
    const t = new MAGRPOTrainer({
      task,
      model: chat,
      sinks: [sink],
      onTree: (p) => roots.push(p.root),
      onEval: (e) => {
        episodes = e.episodes;
      },
      config: {
        ...base,
        num_generations: 2,
        num_turns: 2,
        num_train_epochs: 1,
        max_new_tokens: 3,
        rollout_buffer_size: 2,
        agent_learning_rate: 0.01,
        eval_interval: 2,
        eval_num_samples: 1,
        parallel_training: 'mp',
      },
    });
    const result = await t.train();
    await t.close();
    assert.equal(result.items, 2);
    assert.deepEqual(roots[0].groups[0].prompt, [{ role: 'system', content: 'a' }, ...user('go a')]);
    assert.equal(roots[0].groups[0].promptIds[0], IM_START);
    assert.ok(sink.entries.some((e) => e.metrics['agent_0/grad_norm'] > 0 && e.metrics['agent_1/grad_norm'] > 0));
    assert.ok(sink.entries.some((e) => e.metrics['turn_2/reward_mean'] !== undefined));
    assert.ok(sink.entries.some((e) => e.metrics['eval/turn_1/reward_mean'] !== undefined));
    // Histories and reward inputs hold the messages' text; the template is the agent's.
    assert.deepEqual(seen.find((x) => x.item.prompt === 'go a')?.promptHistory, [['a\n\ngo a'], ['go a']]);
    assert.ok(rewardPrompts.some((p) => p[0] === 'a\n\ngo a' && p[1] === 'go a'));
    assert.equal(episodes.length, 1);
    assert.deepEqual(episodes[0].turns[0].prompts, ['a\n\ngo c', 'go c']);
  });

  it('stops at the template end-of-turn token (<|im_end|>, not the tokenizer EOS here); text prompts do not', () => {
    const lm = LanguageModel.load(chat);
    // Per completion that sampled <|im_end|>: how many tokens came after it.
    const after = (prompt: string | ChatMessage[]) =>
      lm
        .sample(new Array(32).fill(prompt), { maxNewTokens: 12, temperature: 1, rng: 5 })
        .flatMap((s) => (s.completionIds.includes(IM_END) ? [s.completionIds.length - 1 - s.completionIds.indexOf(IM_END)] : []));
    const chatAfter = after(user('go a'));
    assert.ok(chatAfter.length > 0 && chatAfter.every((n) => n === 0), 'a chat completion that samples <|im_end|> ends there');
    assert.ok(
      after('go a').some((n) => n > 0),
      'a text completion runs on past <|im_end|>',
    );
  });

  it('anything but text or a non-empty list of {role, content} is a TaskError naming the formatter and the item', async () => {
    for (const bad of [[], [{ role: 'user' }], [{ role: 'user', content: 3 }]]) {
      const task = { dataset: [{ prompt: 'go' }], formatters: () => bad, reward: () => 0 } as unknown as Task<Item>;
      const t = new MAGRPOTrainer({ task, model: chat, config: { ...base, num_generations: 2, max_new_tokens: 1 } });
      await assert.rejects(
        t.trainStep(task.dataset[0]),
        (e: unknown) =>
          e instanceof TaskError &&
          e.field === 'formatters' &&
          /on agent 0, item 0; a formatter returns the prompt string or a non-empty list of \{role, content\} messages$/.test(e.message),
      );
      await t.close();
    }
  });

  it('a model without a chat template: the error names the option and the model', async () => {
    const task: Task<Item> = { dataset: [{ prompt: 'go' }], formatters: () => user('go'), reward: () => 0 };
    const t = new MAGRPOTrainer({ task, model: plain, config: { ...base, num_generations: 2, max_new_tokens: 1 } });
    await assert.rejects(t.trainStep(task.dataset[0]), (e: unknown) => {
      const m = (e as Error).message;
      return m.startsWith(plain) && m.includes('prompt_style chat') && m.includes('no chat template');
    });
    await t.close();
  });

  it('promptText: text as it is, messages as their contents joined by blank lines', () => {
    assert.equal(promptText('go a'), 'go a');
    assert.equal(promptText([{ role: 'system', content: 'a' }, ...user('go')]), 'a\n\ngo');
  });
});
