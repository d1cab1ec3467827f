/**
 * The paper's inference-only writing baselines (docs/environments.md "Writing baselines";
 * OpenMLRL/LLM_Collab_Writing baselines/*.py @3198dc9):
 *
 *   single_agent          one model writes both parts, split on [PARAGRAPH_SPLIT]     time: its call
 *   naive_parallel        each agent its MAGRPO prompt, independently                time: slowest agent
 *   sequential            agent 2 sees agent 1's response                            time: both calls
 *   one_round_discussion  round 1 independent, round 2 sees the other's round 1      time: slowest agent per round
 *
 * As in the reference scripts every response is stripped (`str.strip()`) before it is scored or
 * shown to another agent. Generation length and sampling come from the caller; the paper used
 * temperature 0.7, top_p 0.9 and 256 new tokens (260 for the TLDR single agent, 512 for arXiv's).
 */
import { Rng } from '../../engine/rng.js';
import type { LanguageModel } from '../../model/pretrained.js';
import type { Formatter, Prompt, RewardFn, Task } from '../../rl/task.js';
import type { Baseline, EpisodeResult, InferenceSampling } from '../environment.js';
import { runTeam } from '../run.js';
import { type BaselinePrompts, PARAGRAPH_SPLIT } from './prompts.js';
import type { WritingReward } from './rewards.js';
import { PY_SPACE_CLASS, pyStrip } from './text-stats.js';

/** What the baselines need to know about one writing environment. */
export interface WritingSpec<Item> {
  /** The post or the abstract of an item. */
  source: (item: Item) => string;
  /** The MAGRPO agents' prompts. */
  formatters: readonly [(source: string) => string, (source: string) => string];
  reward: (c1: string, c2: string) => WritingReward;
  prompts: BaselinePrompts;
  /** What every prompt, the agents' and the baselines', is sent as (default: the text itself; prompt_style chat: the user turn). */
  wrap?: (text: string) => Prompt;
}

export const plainText = (text: string): Prompt => text;

const FIRST_PREFIX = new RegExp(`^Paragraph 1:${PY_SPACE_CLASS}*`, 'iu');
const SECOND_PREFIX = new RegExp(`^Paragraph 2:${PY_SPACE_CLASS}*`, 'iu');

/**
 * Splits a single-agent answer into its two paragraphs: at the first [PARAGRAPH_SPLIT], or, when
 * the model left it out, at len / (1 + ratio) code points with ratio uniform in `ratio` (the
 * intended paragraph-2 / paragraph-1 length ratio). Then "Paragraph 1:" / "Paragraph 2:" prefixes
 * are dropped.
 */
export function splitTwoParagraphs(response: string, ratio: readonly [number, number], rng: Rng): { first: string; second: string; delimiter: boolean } {
  const text = pyStrip(response);
  const at = text.indexOf(PARAGRAPH_SPLIT);
  let first: string;
  let second: string;
  if (at >= 0) {
    first = text.slice(0, at);
    second = text.slice(at + PARAGRAPH_SPLIT.length);
  } else {
    const chars = Array.from(text);
    const r = ratio[0] + (ratio[1] - ratio[0]) * rng.next();
    const cut = Math.floor(chars.length / (1 + r));
    first = chars.slice(0, cut).join('');
    second = chars.slice(cut).join('');
  }
  return { first: pyStrip(first).replace(FIRST_PREFIX, ''), second: pyStrip(second).replace(SECOND_PREFIX, ''), delimiter: at >= 0 };
}

/** One batched call: stripped texts, completion token counts, and seconds per item. */
function sampleBatch(lm: LanguageModel, prompts: readonly Prompt[], sampling: InferenceSampling, stream: number) {
  const t0 = performance.now();
  const out = lm.sample(prompts, { ...sampling, rng: sampling.seed + stream });
  const seconds = (performance.now() - t0) / 1000 / Math.max(1, prompts.length);
  return { texts: out.map((s) => pyStrip(s.text)), tokens: out.map((s) => s.completionIds.length), seconds };
}

function result(index: number, completions: string[], scored: WritingReward, seconds: number, tokens: number): EpisodeResult {
  return { index, completions, reward: scored.reward, components: { ...scored.components }, responseSeconds: seconds, outputTokens: tokens };
}

/** A 2-agent team task scored on stripped responses, for runTeam. */
function teamTask<Item>(spec: WritingSpec<Item>, items: readonly Item[], formatters: Formatter<Item>[]): Task<Item> {
  const reward: RewardFn<Item> = ({ completions }) => {
    const s = spec.reward(pyStrip(completions[0]), pyStrip(completions[1]));
    return { reward: s.reward, components: { ...s.components } };
  };
  return { dataset: items, formatters, reward };
}

export function writingBaselines<Item>(spec: WritingSpec<Item>): Baseline<Item>[] {
  const { prompts, source } = spec;
  const wrap = spec.wrap ?? plainText;
  return [
    {
      name: 'single_agent',
      description: `one model writes both parts, separated by ${PARAGRAPH_SPLIT}`,
      numModels: 1,
      async run(items, models, sampling) {
        const { texts, tokens, seconds } = sampleBatch(
          models[0],
          items.map((it) => wrap(prompts.single(source(it)))),
          sampling,
          0,
        );
        const rng = new Rng(sampling.seed + 1);
        return texts.map((text, e) => {
          const { first, second } = splitTwoParagraphs(text, prompts.fallbackRatio, rng);
          return result(e, [first, second], spec.reward(first, second), seconds, tokens[e]);
        });
      },
    },
    {
      name: 'naive_parallel',
      description: 'each agent answers its own MAGRPO prompt without seeing the other',
      numModels: 2,
      async run(items, models, sampling) {
        const formatters = spec.formatters.map((f) => (item: Item) => wrap(f(source(item))));
        const results = await runTeam(teamTask(spec, items, formatters), items, models, sampling);
        return results.map((r) => ({ ...r, completions: r.completions.map(pyStrip) }));
      },
    },
    {
      name: 'sequential',
      description: "agent 1 answers first; agent 2 sees agent 1's response",
      numModels: 2,
      async run(items, models, sampling) {
        const [firstPrompt, secondPrompt] = prompts.sequential;
        const a = sampleBatch(
          models[0],
          items.map((it) => wrap(firstPrompt(source(it)))),
          sampling,
          0,
        );
        const b = sampleBatch(
          models[1],
          items.map((it, e) => wrap(secondPrompt(source(it), a.texts[e]))),
          sampling,
          7919,
        );
        return items.map((_, e) => result(e, [a.texts[e], b.texts[e]], spec.reward(a.texts[e], b.texts[e]), a.seconds + b.seconds, a.tokens[e] + b.tokens[e]));
      },
    },
    {
      name: 'one_round_discussion',
      description: "round 1 independent; in round 2 each agent sees the other's round-1 response",
      numModels: 2,
      // Two rounds of two batched calls; not runTeam, whose multi-turn path needs the trainer's agents.
      async run(items, models, sampling) {
        const round = (k: number, make: (i: number, item: Item, e: number) => string) =>
          models.slice(0, 2).map((lm, i) =>
            sampleBatch(
              lm,
              items.map((it, e) => wrap(make(i, it, e))),
              sampling,
              7919 * i + 104729 * k,
            ),
          );
        const r1 = round(0, (i, it) => prompts.discussRound1[i](source(it)));
        const r2 = round(1, (i, it, e) => prompts.discussRound2[i](source(it), r1[1 - i].texts[e]));
        const seconds = Math.max(r1[0].seconds, r1[1].seconds) + Math.max(r2[0].seconds, r2[1].seconds);
        return items.map((_, e) => {
          const [a, b] = [r2[0].texts[e], r2[1].texts[e]];
          const tokens = r1[0].tokens[e] + r1[1].tokens[e] + r2[0].tokens[e] + r2[1].tokens[e];
          return result(e, [a, b], spec.reward(a, b), seconds, tokens);
        });
      },
    },
  ];
}
