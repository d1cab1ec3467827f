/**
 * Evaluation episodes (CoMLRL `evaluate`, comlrl/trainers/reinforce/magrpo.py): single path per episode, one completion per agent per turn,
 * the transition between turns, no early termination. All episodes of a turn are sampled in one
 * batch per agent. Metrics: eval/turn_k/reward_mean, eval/turn_k/expected_return (Σ of this and
 * later turns' rewards), per-component means, and the task's own eval hook under eval/.
 */

import { mean } from './advantage.js';
import type { SampledGroup } from './agent.js';
import { forEachAgent } from './agent-pool.js';
import { type GroupFluency, groupFluency, meanFluency } from './fluency.js';
import { callTransition, computeReward, formatPrompt, type RolloutContext, samplingParams } from './rollout.js';
import { type EvalEpisode, promptText } from './task.js';

export async function evaluate<Item>(
  ctx: RolloutContext<Item>,
  items: readonly Item[],
): Promise<{ metrics: Record<string, number>; episodes: EvalEpisode<Item>[] }> {
  const { config } = ctx;
  const N = ctx.agents.length;
  const T = config.num_turns;
  const episodes: EvalEpisode<Item>[] = [];
  for (const [index, item] of items.entries())
    for (let sample = 0; sample < config.eval_samples_per_item; sample++) episodes.push({ item, index, sample, turns: [] });
  if (episodes.length === 0) return { metrics: {}, episodes };

  const params = samplingParams(config, config.eval_sampling === 'greedy');
  let raw: (string | null)[][] = episodes.map(() => new Array<string | null>(N).fill(null));
  const promptHist = episodes.map(() => Array.from({ length: N }, () => [] as string[]));
  const respHist = episodes.map(() => Array.from({ length: N }, () => [] as string[]));
  const fluency: GroupFluency[][] = Array.from({ length: N }, () => []);

  for (let turn = 0; turn < T; turn++) {
    const prompts = episodes.map((ep, e) => raw[e].map((r, i) => formatPrompt({ ...ctx, itemIndex: ep.index }, i, ep.item, r)));
    const sampled = await forEachAgent(ctx.agents, (a) =>
      a.sample(
        prompts.map((p) => ({ prompt: p[a.index], n: 1 })),
        params,
      ),
    );
    const completions = episodes.map((_, e) => sampled.map((groups) => groups[e].completions[0].text));
    const texts = prompts.map((p) => p.map(promptText));
    if (config.fluency_metrics)
      sampled.forEach((groups: SampledGroup[], i) => {
        for (const g of groups) fluency[i].push(groupFluency(g, ctx.task.outputKind !== 'code'));
      });
    const scored = await Promise.all(
      episodes.map((ep, e) => computeReward({ ...ctx, itemIndex: ep.index }, { completions: completions[e], prompts: texts[e], item: ep.item, turn })),
    );
    for (const [e, ep] of episodes.entries())
      ep.turns.push({ prompts: texts[e], completions: completions[e], reward: scored[e].reward, components: scored[e].components });
    if (turn === T - 1) break;
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

  const metrics: Record<string, number> = {};
  for (let t = 0; t < T; t++) {
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
