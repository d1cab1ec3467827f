/**
 * The paper's inference-only coding baselines (docs/environments.md "Coding baselines";
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
 * The prompts follow the environment's prompt style (prompt-style.ts): an agent's code is its
 * role's opening plus its reply ('' + reply for the paper's instruct prompts).
 */
import type { LanguageModel } from '../../model/pretrained.js';
import type { Formatter, Prompt, RewardFn, Task, Transition } from '../../rl/task.js';
import type { PythonSandbox } from '../../sandbox/index.js';
import type { Baseline, EpisodeResult, InferenceSampling } from '../environment.js';
import { runTeam } from '../run.js';
import { pyStrip } from './code-utils.js';
import type { CodingItem } from './data.js';
import { type CodingRole, INSTRUCT, type PromptStyle } from './prompt-style.js';
import { type CodeRewardOptions, codeReward } from './reward.js';

type Score = (item: CodingItem, codes: readonly string[]) => Promise<{ reward: number; components: Record<string, number> }>;

/** Scores the agents' code, [aux, main] (or [main] for one agent), as the reference baselines do. */
function scorer(sandbox: PythonSandbox, opts: CodeRewardOptions): Score {
  return async (item, codes) => {
    const [auxText, mainText] = codes.length === 1 ? ['', codes[0]] : codes;
    const r = await codeReward({ auxText, mainText, test: item.test, entryPoint: item.entry_point, prompt: item.prompt }, sandbox, opts);
    return { reward: r.reward, components: { ...r.components } };
  };
}

export function codingBaselines(sandbox: PythonSandbox, rewardOpts: CodeRewardOptions = {}, style: PromptStyle = INSTRUCT): Baseline<CodingItem>[] {
  const score = scorer(sandbox, rewardOpts);
  /** Each agent's code: its role's opening plus its reply, stripped (every reference baseline strips). */
  const codesOf = (item: CodingItem, roles: readonly CodingRole[], replies: readonly string[]) =>
    replies.map((r, i) => pyStrip(style.opening(item, roles[i]) + r));
  /** One episode per item through runTeam: round-1 prompts, and round 2 built from round 1's code. */
  async function team(
    items: readonly CodingItem[],
    models: readonly LanguageModel[],
    sampling: InferenceSampling,
    roles: readonly CodingRole[],
    first: ((item: CodingItem) => string)[],
    second?: (item: CodingItem, codes: string[]) => string[],
  ): Promise<EpisodeResult[]> {
    const formatters: Formatter<CodingItem>[] = first.map((f) => (item, external) => style.wrap(external ?? f(item)));
    const transition: Transition<CodingItem> | undefined = second && (({ item, completions }) => second(item, codesOf(item, roles, completions)));
    const reward: RewardFn<CodingItem> = ({ item, completions }) => score(item, codesOf(item, roles, completions));
    const task: Task<CodingItem> = { dataset: items, formatters, reward, transition };
    const results = await runTeam(task, items, models.slice(0, roles.length), sampling, second ? 2 : 1);
    return results.map((r) => ({ ...r, completions: codesOf(items[r.index], roles, r.completions) }));
  }
  return [
    {
      name: 'single_agent',
      description: 'one model solves the problem alone (scored with aux = "", max reward 2.1)',
      numModels: 1,
      run: (items, models, sampling) => team(items, models, sampling, ['single'], [style.single]),
    },
    {
      name: 'naive_concat',
      description: 'aux and main are written independently and concatenated',
      numModels: 2,
      run: (items, models, sampling) => team(items, models, sampling, ['aux', 'main'], [style.baselineAux, style.baselineMain]),
    },
    {
      name: 'sequential_pipeline',
      description: "aux is written first; main sees aux's code as already implemented",
      numModels: 2,
      run: (items, models, sampling) => sequential(items, models, sampling, score, style),
    },
    {
      name: 'one_round_discussion',
      description: "round 1 independent; in round 2 aux sees main's code and main sees aux's",
      numModels: 2,
      run: (items, models, sampling) =>
        team(items, models, sampling, ['aux', 'main'], [style.baselineAux, style.baselineMain], (item, [aux, main]) => [
          style.auxSeeingMain(item, style.share(main, item.entry_point)),
          style.mainSeeingAux(item, style.share(aux, 'aux'), 'discussion'),
        ]),
    },
  ];
}

/** One batched call: each reply as code, completion token counts, and seconds per item. */
function sampleBatch(lm: LanguageModel, prompts: readonly Prompt[], openings: readonly string[], sampling: InferenceSampling, stream: number) {
  const t0 = performance.now();
  const out = lm.sample(prompts, { ...sampling, rng: sampling.seed + stream });
  const seconds = (performance.now() - t0) / 1000 / Math.max(1, prompts.length);
  return { codes: out.map((s, i) => pyStrip(openings[i] + s.text)), tokens: out.map((s) => s.completionIds.length), seconds };
}

async function sequential(
  items: readonly CodingItem[],
  models: readonly LanguageModel[],
  sampling: InferenceSampling,
  score: Score,
  style: PromptStyle,
): Promise<EpisodeResult[]> {
  const opening = (role: CodingRole) => items.map((item) => style.opening(item, role));
  const aux = sampleBatch(
    models[0],
    items.map((item) => style.wrap(style.baselineAux(item))),
    opening('aux'),
    sampling,
    0,
  );
  const mainPrompts = items.map((item, e) => style.wrap(style.mainSeeingAux(item, style.share(aux.codes[e], 'aux'), 'sequential')));
  const main = sampleBatch(models[1], mainPrompts, opening('main'), sampling, 7919);
  return Promise.all(
    items.map(async (item, e) => {
      const completions = [aux.codes[e], main.codes[e]];
      const { reward, components } = await score(item, completions);
      return { index: e, completions, reward, components, responseSeconds: aux.seconds + main.seconds, outputTokens: aux.tokens[e] + main.tokens[e] };
    }),
  );
}
