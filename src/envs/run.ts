/**
 * Runs a team of language models (trained or not) on an environment's eval items through the
 * episode runner of the trainer's evaluation (rl/evaluate.ts runEpisodes), timed and
 * token-counted for the eval table. Agents of one turn are sampled back to back; response time
 * counts the slowest agent of each turn (agents are assumed to run in parallel, as in the
 * paper's timing).
 */
import type { LanguageModel } from '../model/pretrained.js';
import { runEpisodes } from '../rl/evaluate.js';
import { formattersFor, type Task } from '../rl/task.js';
import type { EpisodeResult, InferenceSampling } from './environment.js';

export async function runTeam<Item>(
  task: Task<Item>,
  items: readonly Item[],
  models: readonly LanguageModel[],
  sampling: InferenceSampling,
  numTurns = 1,
): Promise<EpisodeResult[]> {
  const outputTokens = items.map(() => 0);
  let responseSeconds = 0;
  // No trainer config here: later turns' prompts go through the formatters, and the reward is the task's alone.
  const ctx = { task, formatters: formattersFor(task, models.length), config: { external_prompt_passthrough: false, reward_processor: null }, itemIndex: 0 };
  const specs = items.map((item, index) => ({ item, index, sample: 0 }));
  const episodes = await runEpisodes(ctx, specs, numTurns, async (prompts, turn) => {
    const perAgentSeconds: number[] = [];
    const texts: string[][] = prompts.map(() => []);
    for (const [i, lm] of models.entries()) {
      const t0 = performance.now();
      const out = lm.sample(
        prompts.map((p) => p[i]),
        { ...sampling, rng: sampling.seed + 7919 * i + 104729 * turn },
      );
      perAgentSeconds.push((performance.now() - t0) / 1000 / Math.max(1, items.length));
      for (const [e, s] of out.entries()) {
        texts[e][i] = s.text;
        outputTokens[e] += s.completionIds.length;
      }
    }
    responseSeconds += Math.max(...perAgentSeconds);
    return texts;
  });
  return episodes.map((ep) => {
    const last = ep.turns[ep.turns.length - 1];
    return {
      index: ep.index,
      completions: last.completions,
      reward: last.reward,
      components: last.components,
      responseSeconds,
      outputTokens: outputTokens[ep.index],
    };
  });
}

/**
 * A printable table: one row per method, one column per metric. Per-agent columns
 * (`word_validity/agent_0`, …) stay in the JSON and CSV; the table shows their summaries.
 */
export function formatTable(rows: { method: string; metrics: Record<string, number> }[]): string {
  const cols = [...new Set(rows.flatMap((r) => Object.keys(r.metrics)))].filter((c) => !c.includes('/agent_'));
  const header = ['method', ...cols];
  const body = rows.map((r) => [r.method, ...cols.map((c) => (r.metrics[c] === undefined ? '-' : fmt(r.metrics[c])))]);
  const widths = header.map((h, j) => Math.max(h.length, ...body.map((b) => b[j].length)));
  const line = (cells: string[]) => cells.map((c, j) => (j === 0 ? c.padEnd(widths[j]) : c.padStart(widths[j]))).join('  ');
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...body.map(line)].join('\n');
}

function fmt(x: number): string {
  return Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 10 ? x.toFixed(1) : x.toFixed(2);
}
