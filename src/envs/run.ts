/**
 * Runs a team of language models (trained or not) on an environment's eval items, single path
 * per episode like the trainer's evaluation, but timed and token-counted for the eval table.
 * Agents of one turn are sampled back to back; response time counts the slowest agent of each
 * turn (agents are assumed to run in parallel, as in the paper's timing).
 */
import type { LanguageModel } from '../model/pretrained.js';
import { resolveConfig } from '../rl/config.js';
import { callTransition, computeReward, formatPrompt, type RolloutContext } from '../rl/rollout.js';
import { formattersFor, promptText, type Task } from '../rl/task.js';
import type { EpisodeResult, InferenceSampling } from './environment.js';

export async function runTeam<Item>(
  task: Task<Item>,
  items: readonly Item[],
  models: readonly LanguageModel[],
  sampling: InferenceSampling,
  numTurns = 1,
): Promise<EpisodeResult[]> {
  const N = models.length;
  const ctx: RolloutContext<Item> = {
    task,
    config: resolveConfig({ num_agents: N, num_turns: numTurns, external_prompt_passthrough: false }),
    agents: [],
    formatters: formattersFor(task, N),
    itemIndex: 0,
  };
  const results: EpisodeResult[] = items.map((_, index) => ({ index, completions: [], reward: 0, components: {}, responseSeconds: 0, outputTokens: 0 }));
  let raw: (string | null)[][] = items.map(() => new Array<string | null>(N).fill(null));
  const promptHist = items.map(() => Array.from({ length: N }, () => [] as string[]));
  const respHist = items.map(() => Array.from({ length: N }, () => [] as string[]));
  for (let turn = 0; turn < numTurns; turn++) {
    const prompts = items.map((item, e) => raw[e].map((r, i) => formatPrompt({ ...ctx, itemIndex: e }, i, item, r)));
    const perAgentSeconds: number[] = [];
    const texts: string[][] = items.map(() => []);
    for (const [i, lm] of models.entries()) {
      const t0 = performance.now();
      const out = lm.sample(
        prompts.map((p) => p[i]),
        { ...sampling, rng: sampling.seed + 7919 * i + 104729 * turn },
      );
      perAgentSeconds.push((performance.now() - t0) / 1000 / Math.max(1, items.length));
      for (const [e, s] of out.entries()) {
        texts[e][i] = s.text;
        results[e].outputTokens += s.completionIds.length;
      }
    }
    const turnSeconds = Math.max(...perAgentSeconds);
    const promptTexts = prompts.map((p) => p.map(promptText));
    const scored = await Promise.all(
      items.map((item, e) => computeReward({ ...ctx, itemIndex: e }, { completions: texts[e], prompts: promptTexts[e], item, turn })),
    );
    for (const [e, r] of results.entries()) {
      r.completions = texts[e];
      r.reward = scored[e].reward;
      r.components = scored[e].components;
      r.responseSeconds += turnSeconds;
    }
    if (turn === numTurns - 1) break;
    raw = await Promise.all(
      items.map(async (item, e) => {
        for (let i = 0; i < N; i++) {
          promptHist[e][i].push(raw[e][i] ?? promptTexts[e][i]);
          respHist[e][i].push(texts[e][i]);
        }
        return callTransition({ ...ctx, itemIndex: e }, item, turn, texts[e], promptHist[e], respHist[e]);
      }),
    );
  }
  return results;
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
