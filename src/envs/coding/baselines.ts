/**
 * The paper's inference-only coding baselines (environments-reference.md §2.4 "Coding baselines";
 * baselines/single_agent.py and multi_agent_tti.py), every one scored by the same reward as the
 * trained team so they land in one table:
 *
 *   single_agent          one model, "solve the problem" prompt, scored with aux = "" (max 2.1)
 *   naive_concat          aux and main written independently, then concatenated
 *   sequential_pipeline   main sees aux's code as "already implemented"
 *   one_round_discussion  round 1 as naive; in round 2 aux sees main's code and improves what
 *                         main needs, main sees aux's code and is asked to use it correctly
 *
 * Response time per episode follows runTeam: calls that could run in parallel count as the slowest
 * of them, calls that wait for another add up (sequential: aux + main). As in the reference scripts,
 * every response is stripped before it is scored or shown to the other agent. The reference used
 * temperature 0.8, top_p 0.95 and 256 new tokens; those come from the caller's sampling settings.
 */
import type { LanguageModel } from '../../model/pretrained.js';
import type { Formatter, RewardFn, Task, Transition } from '../../rl/task.js';
import type { PythonSandbox } from '../../sandbox/index.js';
import type { Baseline, EpisodeResult, InferenceSampling } from '../environment.js';
import { runTeam } from '../run.js';
import { pyStrip } from './code-utils.js';
import type { CodingItem } from './data.js';
import { baselineAuxPrompt, baselineMainPrompt, discussionAuxPrompt, discussionMainPrompt, sequentialMainPrompt, singleAgentPrompt } from './prompts.js';
import { type CodeRewardOptions, codeReward } from './reward.js';

type Score = (item: CodingItem, completions: readonly string[]) => Promise<{ reward: number; components: Record<string, number> }>;

/** Scores [aux, main] (or [main] for one agent) after stripping, as the reference baselines do. */
function stripAndScore(sandbox: PythonSandbox, opts: CodeRewardOptions): Score {
  return async (item, completions) => {
    const texts = completions.map(pyStrip);
    const [auxText, mainText] = texts.length === 1 ? ['', texts[0]] : texts;
    const r = await codeReward({ auxText, mainText, test: item.test, entryPoint: item.entry_point, prompt: item.prompt }, sandbox, opts);
    return { reward: r.reward, components: { ...r.components } };
  };
}

const passThrough =
  (first: (item: CodingItem) => string): Formatter<CodingItem> =>
  (item, external) =>
    external ?? first(item);

const stripAll = (rs: EpisodeResult[]) => rs.map((r) => ({ ...r, completions: r.completions.map(pyStrip) }));

export function codingBaselines(sandbox: PythonSandbox, rewardOpts: CodeRewardOptions = {}): Baseline<CodingItem>[] {
  const score = stripAndScore(sandbox, rewardOpts);
  const reward: RewardFn<CodingItem> = ({ item, completions }) => score(item, completions);
  const team = (items: readonly CodingItem[], formatters: Formatter<CodingItem>[], transition?: Transition<CodingItem>): Task<CodingItem> => ({
    dataset: items,
    formatters,
    reward,
    transition,
  });
  return [
    {
      name: 'single_agent',
      description: 'one model solves the problem alone (scored with aux = "", max reward 2.1)',
      numModels: 1,
      async run(items, models, sampling) {
        return stripAll(await runTeam(team(items, [singleAgentPrompt]), items, models.slice(0, 1), sampling));
      },
    },
    {
      name: 'naive_concat',
      description: 'aux and main are written independently and concatenated',
      numModels: 2,
      async run(items, models, sampling) {
        return stripAll(await runTeam(team(items, [baselineAuxPrompt, baselineMainPrompt]), items, models, sampling));
      },
    },
    {
      name: 'sequential_pipeline',
      description: "aux is written first; main sees aux's code as already implemented",
      numModels: 2,
      run: (items, models, sampling) => sequential(items, models, sampling, score),
    },
    {
      name: 'one_round_discussion',
      description: "round 1 independent; in round 2 aux sees main's code and main sees aux's",
      numModels: 2,
      async run(items, models, sampling) {
        const round2: Transition<CodingItem> = ({ item, completions }) => [
          discussionAuxPrompt(item, pyStrip(completions[1])),
          discussionMainPrompt(item, pyStrip(completions[0])),
        ];
        const task = team(items, [passThrough(baselineAuxPrompt), passThrough(baselineMainPrompt)], round2);
        return stripAll(await runTeam(task, items, models, sampling, 2));
      },
    },
  ];
}

/** One batched call: stripped texts, completion token counts, and seconds per item. */
function sampleBatch(lm: LanguageModel, prompts: readonly string[], sampling: InferenceSampling, stream: number) {
  const t0 = performance.now();
  const out = lm.sample(prompts, { ...sampling, rng: sampling.seed + stream });
  const seconds = (performance.now() - t0) / 1000 / Math.max(1, prompts.length);
  return { texts: out.map((s) => pyStrip(s.text)), tokens: out.map((s) => s.completionIds.length), seconds };
}

async function sequential(items: readonly CodingItem[], models: readonly LanguageModel[], sampling: InferenceSampling, score: Score): Promise<EpisodeResult[]> {
  const aux = sampleBatch(models[0], items.map(baselineAuxPrompt), sampling, 0);
  const mainPrompts = items.map((item, e) => sequentialMainPrompt(item, aux.texts[e]));
  const main = sampleBatch(models[1], mainPrompts, sampling, 7919);
  return Promise.all(
    items.map(async (item, e) => {
      const completions = [aux.texts[e], main.texts[e]];
      const { reward, components } = await score(item, completions);
      return { index: e, completions, reward, components, responseSeconds: aux.seconds + main.seconds, outputTokens: aux.tokens[e] + main.tokens[e] };
    }),
  );
}
