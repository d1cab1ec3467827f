/** The tldr and arxiv environments: task wiring, the paper's metrics, and a short MAGRPO run each. */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setBackend } from '../../../src/engine/runtime.js';
import type { Environment, EpisodeResult } from '../../../src/envs/environment.js';
import { envEntry } from '../../../src/envs/registry.js';
import { type ArxivItem, arxivEnvironment, arxivReward, type TldrItem, tldrEnvironment } from '../../../src/envs/writing/index.js';
import { arxivBackgroundPrompt, arxivMethodsPrompt, tldrElaborationPrompt, tldrSummaryPrompt } from '../../../src/envs/writing/prompts.js';
import type { LanguageModel, TextSample } from '../../../src/model/pretrained.js';
import { TextTokenizer } from '../../../src/model/tokenizer.js';
import { MemorySink } from '../../../src/rl/metrics.js';
import { formattersFor, type Prompt, promptText, type RewardFn } from '../../../src/rl/task.js';
import { MAGRPOTrainer } from '../../../src/rl/trainer.js';
import { makeTinyWriter } from './tiny-writer.js';

const post = (s: string): TldrItem => ({ prompt: `SOURCE: test\n\nPOST: ${s}\n\nTL;DR:` });
const tldrItems = [post('The whale rose beside the ship at dawn.'), post('Congress met in December.'), post('A storm came at night.')];
const arxivItems: ArxivItem[] = [{ abstract_text: 'We study whales and their songs.' }, { abstract_text: 'We measure the budget of a nation.' }];

const ws = (from: number, n: number) => Array.from({ length: n }, (_, i) => `w${from + i}`).join(' ');
const episode = (completions: string[], reward: number, responseSeconds = 0): EpisodeResult => ({
  index: 0,
  completions,
  reward,
  components: {},
  responseSeconds,
  outputTokens: 0,
});

describe('environment definitions', () => {
  it('tldr: 2 agents, the MAGRPO formatters, a reward with the five components', async () => {
    const env = tldrEnvironment();
    assert.equal(env.name, 'tldr');
    assert.equal(env.numAgents, 2);
    const task = env.task({ train: tldrItems, eval: tldrItems.slice(0, 1) });
    assert.equal(task.dataset, tldrItems);
    const [f1, f2] = formattersFor(task, 2);
    assert.equal(f1(tldrItems[0]), tldrSummaryPrompt(tldrItems[0].prompt));
    assert.equal(f2(tldrItems[0]), tldrElaborationPrompt(tldrItems[0].prompt));
    assert.ok(promptText(f1(tldrItems[0])).startsWith('Create a concise summary response to this post.\n\nQuery:\nSOURCE: test'));
    const reward = task.reward as RewardFn<TldrItem>;
    const c1 = ws(1, 10).padEnd(100);
    const c2 = `w1 ${ws(101, 19)}`.padEnd(200);
    const v = await reward({ completions: [c1, c2], prompts: ['', ''], item: tldrItems[0], turn: 0 });
    assert.deepEqual(v, { reward: 2.6, components: { structure: 0.5, coordination: 1, vocabulary: 0.5, transition: 0, jaccard: 0.6 } });
    assert.throws(() => reward({ completions: [c1, c2, c2], prompts: [], item: tldrItems[0], turn: 0 }), /exactly 2 agents/);
  });

  it('arxiv: background / methods formatters; the L2 band follows `version` (paper by default)', async () => {
    const paper = arxivEnvironment().task({ train: arxivItems, eval: [] });
    const [f1, f2] = formattersFor(paper, 2);
    assert.equal(f1(arxivItems[0]), arxivBackgroundPrompt(arxivItems[0].abstract_text));
    assert.equal(f2(arxivItems[0]), arxivMethodsPrompt(arxivItems[0].abstract_text));
    const c1 = ws(1, 130).padEnd(1000);
    const c2 = `${ws(1, 60)} ${ws(1001, 70)}`.padEnd(1000); // r = 1.0: optimal in the paper band only
    const score = async (env: ReturnType<typeof arxivEnvironment>) =>
      (await (env.task({ train: arxivItems }).reward as RewardFn<ArxivItem>)({ completions: [c1, c2], prompts: [], item: arxivItems[0], turn: 0 })) as {
        components: Record<string, number>;
      };
    assert.equal((await score(arxivEnvironment())).components.coordination, 1);
    assert.equal(
      (await score(arxivEnvironment({ version: 'latest' }))).components.coordination,
      arxivReward(c1, c2, { version: 'latest' }).components.coordination,
    );
    assert.ok(Math.abs((await score(arxivEnvironment({ version: 'latest' }))).components.coordination - 0.4) < 1e-12);
  });

  it('metrics: the paper’s normalised metrics in %, gated and ungated, from the completions', () => {
    const env = tldrEnvironment();
    const best = [ws(1, 10).padEnd(100), `w1 ${ws(101, 19)}`.padEnd(200)]; // 2.6
    const stopsAtL2 = [ws(1, 10).padEnd(100), `w1 ${ws(101, 19)}`.padEnd(109)]; // r 1.09: 0.5 gated
    const m = env.metrics([episode(best, 2.6, 1), episode(stopsAtL2, 0.5, 3)], tldrItems);
    const near = (k: string, v: number) => assert.ok(Math.abs(m[k] - v) < 1e-9, `${k}: ${m[k]} ≠ ${v}`);
    near('structure', (100 * ((2 + 0.5) / 2)) / 2);
    near('coherence', 0);
    near('consistency', (100 * (0.6 / 2)) / 0.6);
    near('return', (100 * ((2.6 + 0.5) / 2)) / 3);
    near('ungated_structure', (100 * ((2 + 1) / 2)) / 2); // L3 = 0.5 counts when ungated
    near('ungated_consistency', 100);
    near('mean_return', 1.55);
    near('response_s', 2);
  });
});

describe('prompt_style: chat', () => {
  const tokenizer = TextTokenizer.fromDir(join(import.meta.dirname, '../../fixtures/models/tiny-qwen2'));
  /** The fixture's template: ChatML without a system turn. */
  const chatml = (text: string) => `<|im_start|>user\n${text}<|im_end|>\n<|im_start|>assistant\n`;

  it("the paper's prompts are the user turn, rendered by the agent's template with the generation prompt (tldr, arxiv)", () => {
    const check = <I>(env: Environment<I>, item: I, paper: readonly ((source: string) => string)[], source: string) => {
      for (const [i, f] of formattersFor(env.task({ train: [item], eval: [] }), 2).entries()) {
        const prompt = f(item);
        assert.deepEqual(prompt, [{ role: 'user', content: paper[i](source) }], `${env.name} agent ${i}`);
        const text = tokenizer.renderPrompt(prompt);
        assert.equal(text, chatml(paper[i](source)));
        assert.deepEqual(tokenizer.promptIds(prompt), tokenizer.encode(text, { addSpecialTokens: false }));
      }
    };
    check(tldrEnvironment({ prompt_style: 'chat' }), tldrItems[0], [tldrSummaryPrompt, tldrElaborationPrompt], tldrItems[0].prompt);
    check(arxivEnvironment({ prompt_style: 'chat' }), arxivItems[0], [arxivBackgroundPrompt, arxivMethodsPrompt], arxivItems[0].abstract_text);
  });

  it('every baseline sends the instruct prompts, each as the user turn', async () => {
    const sent = async (env: ReturnType<typeof tldrEnvironment>) => {
      const prompts: Prompt[] = [];
      const lm = {
        sample: (ps: readonly Prompt[]): TextSample[] => {
          prompts.push(...ps);
          return ps.map((p) => ({ promptIds: [], completionIds: [1], text: ` reply to ${promptText(p).length}`, logprobs: [], finishReason: 'stop_token' }));
        },
      } as unknown as LanguageModel;
      for (const b of env.baselines) await b.run(tldrItems.slice(0, 2), [lm, lm], { maxNewTokens: 4, seed: 1 });
      return prompts;
    };
    const instruct = await sent(tldrEnvironment());
    const chat = await sent(tldrEnvironment({ prompt_style: 'chat' }));
    assert.equal(chat.length, 2 * (1 + 2 + 2 + 4));
    assert.deepEqual(
      chat,
      instruct.map((p) => [{ role: 'user', content: p }]),
    );
  });

  it('the registry takes prompt_style chat for both writing environments', async () => {
    for (const [name, item, first] of [
      ['tldr', tldrItems[0], tldrSummaryPrompt(tldrItems[0].prompt)],
      ['arxiv', arxivItems[0], arxivBackgroundPrompt(arxivItems[0].abstract_text)],
    ] as const) {
      const entry = envEntry(name);
      assert.ok(entry);
      const env = await entry.load(entry.options.parse({ prompt_style: 'chat' }));
      assert.deepEqual(formattersFor(env.task({ train: [item], eval: [] }), 2)[0](item), [{ role: 'user', content: first }]);
    }
  });
});

describe('a short MAGRPO run through the trainer', () => {
  let dir = '';
  before(() => {
    setBackend('native');
    dir = makeTinyWriter(2);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const config = {
    num_train_epochs: 1,
    num_generations: 2,
    max_new_tokens: 8,
    temperature: 0.7,
    top_p: 0.9,
    eval_interval: 0,
    logging_steps: 1,
    rollout_buffer_size: 1,
  };

  for (const [name, task] of [
    ['tldr', tldrEnvironment().task({ train: tldrItems, eval: [] })],
    ['tldr, prompt_style chat', tldrEnvironment({ prompt_style: 'chat' }).task({ train: tldrItems, eval: [] })],
    ['arxiv', arxivEnvironment().task({ train: arxivItems, eval: [] })],
  ] as const) {
    it(`${name}: completes and logs turn_1/reward/<component> for every component`, async () => {
      const sink = new MemorySink();
      const t = new MAGRPOTrainer({ task: task as never, models: [dir, dir], config, sinks: [sink] });
      const out = await t.train();
      await t.close();
      assert.equal(out.items, task.dataset.length);
      for (const c of ['structure', 'coordination', 'vocabulary', 'transition', 'jaccard']) {
        const s = sink.series(`turn_1/reward/${c}`);
        assert.equal(s.length, task.dataset.length, c);
        assert.ok(s.every((p) => Number.isFinite(p.value)));
      }
      assert.ok(sink.series('agent_1/loss').length > 0);
    });
  }
});
