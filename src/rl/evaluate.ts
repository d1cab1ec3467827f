/**
 * Single-path episodes (CoMLRL `evaluate`, comlrl/trainers/reinforce/magrpo.py): one completion per
 * agent per turn, the transition between turns, no early termination. `runEpisodes` is the loop,
 * shared by the trainer's evaluation (below) and the team runner of baselines and `magrpo eval`
 * (envs/run.ts); each brings its own sampler. All episodes of a turn are sampled together.
 *
 * Evaluation metrics: eval/turn_k/reward_mean, eval/turn_k/expected_return (Σ of this and later
 * turns' rewards), per-component means, and the task's own eval hook under eval/.
 */

import { mean } from './advantage.js';
import type { SampledGroup } from './agent.js';
import { sampleEach } from './agent-pool.js';
import { type GroupFluency, groupFluency, meanFluency } from './fluency-monitor.js';
import { callTransition, computeReward, formatPrompt, type RolloutContext, samplingParams, type TaskContext } from './rollout.js';
import { type EvalEpisode, type Prompt, promptText } from './task.js';

/** One completion text per agent for each episode's prompts (`prompts[episode][agent]`), as `[episode][agent]`. */
export type TurnSampler = (prompts: Prompt[][], turn: number) => Promise<string[][]>;

/**
 * Plays `numTurns` turns of each episode: prompts from the formatters (later turns from the
 * transition's prompts), one sampler call per turn for every episode, the joint reward of each
 * turn. Returns the episodes with their turns.
 */
export async function runEpisodes<Item>(
  ctx: TaskContext<Item>,
  specs: readonly Omit<EvalEpisode<Item>, 'turns'>[],
  numTurns: number,
  sample: TurnSampler,
): Promise<EvalEpisode<Item>[]> {
  const N = ctx.formatters.length;
  const episodes: EvalEpisode<Item>[] = specs.map((s) => ({ ...s, turns: [] }));
  if (episodes.length === 0) return episodes;
  let raw: (string | null)[][] = episodes.map(() => new Array<string | null>(N).fill(null));
  const promptHist = episodes.map(() => Array.from({ length: N }, () => [] as string[]));
  const respHist = episodes.map(() => Array.from({ length: N }, () => [] as string[]));
  for (let turn = 0; turn < numTurns; turn++) {
    const prompts = episodes.map((ep, e) => raw[e].map((r, i) => formatPrompt({ ...ctx, itemIndex: ep.index }, i, ep.item, r)));
    const completions = await sample(prompts, turn);
    const texts = prompts.map((p) => p.map(promptText));
    const scored = await Promise.all(
      episodes.map((ep, e) => computeReward({ ...ctx, itemIndex: ep.index }, { completions: completions[e], prompts: texts[e], item: ep.item, turn })),
    );
    for (const [e, ep] of episodes.entries())
      ep.turns.push({ prompts: texts[e], completions: completions[e], reward: scored[e].reward, components: scored[e].components });
    if (turn === numTurns - 1) break;
    raw = await Promise.all(
      episodes.map(async (ep, e) => {
        for (let i = 0; i < N; i++) {
          promptHist[e][i].push(raw[e][i] ?? texts[e][i]);
          respHist[e][i].push(completions[e][i]);
        }
        return callTransition({ ...ctx, itemIndex: ep.index }, ep.item, turn, completions[e], promptHist[e], respHist[e]);
      }),
    );
  }
  return episodes;
}

/** The trainer's evaluation: eval_samples_per_item episodes per item, sampled by the agents in one batch per agent. */
export async function evaluate<Item>(
  ctx: RolloutContext<Item>,
  items: readonly Item[],
): Promise<{ metrics: Record<string, number>; episodes: EvalEpisode<Item>[] }> {
  const { config } = ctx;
  const specs: Omit<EvalEpisode<Item>, 'turns'>[] = [];
  for (const [index, item] of items.entries()) for (let sample = 0; sample < config.eval_samples_per_item; sample++) specs.push({ item, index, sample });
  const params = samplingParams(config, config.eval_sampling === 'greedy');
  const fluency: GroupFluency[][] = ctx.agents.map(() => []);
  const episodes = await runEpisodes(ctx, specs, config.num_turns, async (prompts) => {
    const sampled = await sampleEach(ctx.agents, (a) => prompts.map((p) => ({ prompt: p[a.index], n: 1 })), params);
    if (config.fluency_metrics)
      sampled.forEach((groups: SampledGroup[], i) => {
        for (const g of groups) fluency[i].push(groupFluency(g, ctx.task.outputKind !== 'code'));
      });
    return prompts.map((_, e) => sampled.map((groups) => groups[e].completions[0].text));
  });
  if (episodes.length === 0) return { metrics: {}, episodes };

  const metrics: Record<string, number> = {};
  for (let t = 0; t < config.num_turns; t++) {
    metrics[`eval/turn_${t + 1}/reward_mean`] = mean(episodes.map((ep) => ep.turns[t].reward));
    metrics[`eval/turn_${t + 1}/expected_return`] = mean(episodes.map((ep) => ep.turns.slice(t).reduce((s, x) => s + x.reward, 0)));
    const names = new Set(episodes.flatMap((ep) => Object.keys(ep.turns[t].components)));
    for (const name of names) metrics[`eval/turn_${t + 1}/reward/${name}`] = mean(episodes.map((ep) => ep.turns[t].components[name] ?? 0));
  }
  for (const [i, fs] of fluency.entries()) for (const [name, v] of Object.entries(meanFluency(fs))) metrics[`eval/agent_${i}/${name}`] = v;
  if (ctx.task.evalMetrics) {
    const extra = await ctx.task.evalMetrics(episodes);
    for (const [k, v] of Object.entries(extra)) metrics[`eval/${k}`] = v;
  }
  return { metrics, episodes };
}
