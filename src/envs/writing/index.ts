/**
 * The paper's two writing environments (paper §5.1; docs/environments.md), two agents each, single turn:
 *
 *   tldr   agent 1 a concise summary of a post, agent 2 a detailed one     tldr_combined_reward
 *   arxiv  agent 1 background/motivation, agent 2 methodology/implications  arxiv_combined_reward
 *
 * Default data: passages of public-domain text shipped in data/writing/ (see its README).
 */
import { join } from 'node:path';
import type { z } from 'zod';
import { packageRoot } from '../../data/package-root.js';
import type { Task } from '../../rl/task.js';
import { contentSupport, copiedRuns, echo, FAITHFULNESS_METRICS, faithfulness, wordsOf } from '../../text/faithfulness.js';
import { clauseLength, distinctN, wordValidity } from '../../text/fluency-measures.js';
import { grammarValidity } from '../../text/grammar.js';
import { type Environment, type EpisodeResult, userTurn } from '../environment.js';
import { readOptions } from '../options.js';
import { plainText, type WritingSpec, writingBaselines } from './baselines.js';
import { ARXIV_COMPLETION, type CompletionPrompts, TLDR_COMPLETION } from './completion-prompts.js';
import { type ArxivItem, loadWritingItems, type TldrItem, type WritingField } from './data.js';
import {
  type ArxivOptions,
  ArxivOptionsSchema,
  type FaithfulnessGuard,
  type FluencyGuard,
  type FluencyRamp,
  type TldrOptions,
  TldrOptionsSchema,
  type WritingPromptStyle,
} from './options.js';
import {
  ARXIV_BASELINE_PROMPTS,
  arxivBackgroundPrompt,
  arxivMethodsPrompt,
  TLDR_BASELINE_PROMPTS,
  tldrElaborationPrompt,
  tldrSummaryPrompt,
} from './prompts.js';
import { arxivLevels, arxivReward, gate, normalisedMetrics, tldrLevels, tldrReward, ungated, type WritingLevels } from './rewards.js';

export type { ArxivItem, TldrItem } from './data.js';
export { loadWritingItems, WritingDataError } from './data.js';
export type { ArxivOptions, ArxivVersion, FaithfulnessGuard, FluencyGuard, TldrOptions, WritingPromptStyle } from './options.js';
export { arxivReward, normalisedMetrics, tldrReward } from './rewards.js';

const ramp = (x: number, r: FluencyRamp) => Math.min(1, Math.max(0, (x - r.zero_at) / (r.full_at - r.zero_at)));

/**
 * The fluency guard's factor in [0, 1] for one joint action (options.ts fluency_guard): the
 * product over agents of a ramp on word validity, and on distinct-2, grammar validity and clause
 * length where given, so letter soup, runs of one word and word salad earn nothing.
 */
export function fluencyFactor(completions: readonly string[], guard: FluencyGuard): number {
  let f = 1;
  for (const c of completions) {
    f *= ramp(wordValidity(c), guard);
    if (guard.distinct_2) f *= ramp(distinctN(c, 2), guard.distinct_2);
    if (guard.grammar) f *= ramp(grammarValidity(c), guard.grammar);
    if (guard.clause_length) f *= ramp(clauseLength(c), guard.clause_length);
  }
  return f;
}

/**
 * The faithfulness guard's factor in [0, 1] for one joint action against its post (options.ts
 * faithfulness_guard): the product over its agents (all by default) of a ramp on content support,
 * and of a falling ramp on copied 8-word runs where given, so that text the post does not support
 * earns nothing and pasting the post is not the way to support. A list of guards (ramps of their
 * own for different agents) multiplies their factors.
 */
export function faithfulnessFactor(completions: readonly string[], post: string, guard: FaithfulnessGuard | readonly FaithfulnessGuard[]): number {
  const guards: readonly FaithfulnessGuard[] = Array.isArray(guard) ? guard : [guard as FaithfulnessGuard];
  let f = 1;
  for (const g of guards)
    for (const [i, c] of completions.entries()) {
      if (g.agents && !g.agents.includes(i)) continue;
      f *= ramp(contentSupport(c, post), g.support);
      if (g.copied) {
        const { full_at, zero_at } = g.copied;
        f *= Math.min(1, Math.max(0, (zero_at - copiedRuns(c, post)) / (zero_at - full_at)));
      }
    }
  return f;
}

interface WritingKind<Item> extends WritingSpec<Item> {
  name: 'tldr' | 'arxiv';
  description: string;
  field: WritingField;
  levels: (c1: string, c2: string) => WritingLevels;
}

/**
 * The kind in a prompt style: 'instruct' the paper's prompts as raw text, as the paper's trainer
 * sent them; 'chat' the same as the user turn of each agent's chat template; 'completion' the
 * source text and the opening of the agent's paragraph (completion-prompts.ts). Baselines alike.
 */
function styled<Item>(kind: WritingKind<Item>, style: WritingPromptStyle, completion: CompletionPrompts): WritingKind<Item> {
  if (style === 'instruct') return kind;
  if (style === 'chat') return { ...kind, wrap: userTurn };
  return { ...kind, formatters: completion.formatters, prompts: completion.baselines };
}

function writingEnvironment<Item>(kind: WritingKind<Item>, opts: z.output<typeof TldrOptionsSchema>): Environment<Item> {
  const dataDir = opts.data_dir ?? join(packageRoot(), 'data', 'writing');
  const load = (split: 'train' | 'eval') => loadWritingItems(join(dataDir, `${kind.name}.${split}.jsonl.gz`), kind.field) as unknown as Item[];
  const [f1, f2] = kind.formatters;
  const wrap = kind.wrap ?? plainText;
  return {
    name: kind.name,
    description: kind.description,
    numAgents: 2,
    defaultSplits: () => ({ train: load('train'), eval: load('eval') }),
    task(split = {}): Task<Item> {
      return {
        name: kind.name,
        outputKind: 'prose',
        dataset: split.train ?? load('train'),
        evalDataset: split.eval ?? load('eval'),
        formatters: [(item) => wrap(f1(kind.source(item))), (item) => wrap(f2(kind.source(item)))],
        reward: ({ completions, item }) => {
          if (completions.length !== 2) throw new Error(`the ${kind.name} reward scores exactly 2 agents, got ${completions.length}`);
          const s = kind.reward(completions[0], completions[1]);
          const components: Record<string, number> = { ...s.components };
          let reward = s.reward;
          if (opts.fluency_guard) {
            components.fluency_factor = fluencyFactor(completions, opts.fluency_guard);
            reward *= components.fluency_factor;
          }
          if (opts.faithfulness_guard) {
            components.faithfulness_factor = faithfulnessFactor(completions, postText(kind.source(item)), opts.faithfulness_guard);
            reward *= components.faithfulness_factor;
          }
          return { reward, components };
        },
      };
    },
    metrics: (episodes, items) => ({
      ...writingMetrics(episodes, kind.levels),
      ...faithfulnessColumns(
        episodes,
        items.map((it) => postText(kind.source(it))),
      ),
    }),
    baselines: writingBaselines(kind),
  };
}

/**
 * The paper's normalised metrics in % (structure, coherence, consistency, return), recomputed from
 * the completions with the gated reward; `ungated_*` score every level independently, as the
 * authors' loggers report per-level values. Plus the mean return as the runner reported it (after
 * any reward processor) and the mean response time in seconds.
 */
function writingMetrics(episodes: readonly EpisodeResult[], levels: WritingKind<unknown>['levels']): Record<string, number> {
  const all = episodes.map((e) => levels(e.completions[0] ?? '', e.completions[1] ?? ''));
  const gated = normalisedMetrics(all.map(gate));
  const loose = normalisedMetrics(all.map(ungated));
  const n = Math.max(1, episodes.length);
  return {
    ...gated,
    ungated_structure: loose.structure,
    ungated_coherence: loose.coherence,
    ungated_consistency: loose.consistency,
    mean_return: episodes.reduce((s, e) => s + e.reward, 0) / n,
    response_s: episodes.reduce((s, e) => s + e.responseSeconds, 0) / n,
  };
}

/** The text a summary answers for: a TL;DR item's post without its SOURCE header and trailing "TL;DR:". */
export function postText(source: string): string {
  const post = /POST:\s*([\s\S]*)$/.exec(source)?.[1] ?? source;
  return post.replace(/\s*TL;DR:\s*$/, '');
}

/**
 * What the reward does not see (src/text/faithfulness.ts), in %: per agent the share of content
 * words and of bigrams found in the post, ROUGE-L precision against it, the share of words in
 * 8-word runs copied from it, and words per answer; `echo` is ROUGE-L F1 between the two agents'
 * answers. The table shows the weaker agent's support and the larger copied share.
 */
function faithfulnessColumns(episodes: readonly EpisodeResult[], posts: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  const N = Math.max(0, ...episodes.map((e) => e.completions.length));
  const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);
  const support: number[] = [];
  const copied: number[] = [];
  for (let i = 0; i < N; i++) {
    const f = episodes.map((e) => faithfulness(e.completions[i] ?? '', posts[e.index] ?? ''));
    for (const k of FAITHFULNESS_METRICS) out[`${k}/agent_${i}`] = 100 * mean(f.map((x) => x[k]));
    out[`words/agent_${i}`] = mean(episodes.map((e) => wordsOf(e.completions[i] ?? '').length));
    support.push(out[`content_support/agent_${i}`]);
    copied.push(out[`copied_8/agent_${i}`]);
  }
  if (N === 0) return out;
  out.content_support = Math.min(...support);
  out.copied_8 = Math.max(...copied);
  if (N >= 2) out.echo = 100 * mean(episodes.map((e) => echo(e.completions[0] ?? '', e.completions[1] ?? '')));
  return out;
}

/** TLDR: summarise a post as a concise (agent 1) and a detailed (agent 2) summary. */
export function tldrEnvironment(options: TldrOptions = {}): Environment<TldrItem> {
  const opts = readOptions(TldrOptionsSchema, options, 'tldr');
  const kind = styled<TldrItem>(
    {
      name: 'tldr',
      description: 'TL;DR summarisation: agent 1 writes a concise summary, agent 2 a detailed one (2-3x longer, richer vocabulary)',
      field: 'prompt',
      source: (item) => item.prompt,
      formatters: [tldrSummaryPrompt, tldrElaborationPrompt],
      reward: tldrReward,
      levels: tldrLevels,
      prompts: TLDR_BASELINE_PROMPTS,
    },
    opts.prompt_style,
    TLDR_COMPLETION,
  );
  return writingEnvironment(kind, opts);
}

/**
 * arXiv: expand an abstract into an introduction, agent 1 background and motivation, agent 2
 * methodology and implications. `version` picks the reward's L2 band: 'paper' (default, the
 * paper-era 1.0–1.3 optimum) or 'latest' (1.3–1.6, changed 2025-12-31).
 */
export function arxivEnvironment(options: ArxivOptions = {}): Environment<ArxivItem> {
  const opts = readOptions(ArxivOptionsSchema, options, 'arxiv');
  const { version } = opts;
  const kind = styled<ArxivItem>(
    {
      name: 'arxiv',
      description: `arXiv abstract expansion: agent 1 background and motivation, agent 2 methodology and implications (L2 band: ${version})`,
      field: 'abstract_text',
      source: (item) => item.abstract_text,
      formatters: [arxivBackgroundPrompt, arxivMethodsPrompt],
      reward: (c1, c2) => arxivReward(c1, c2, { version }),
      levels: (c1, c2) => arxivLevels(c1, c2, { version }),
      prompts: ARXIV_BASELINE_PROMPTS,
    },
    opts.prompt_style,
    ARXIV_COMPLETION,
  );
  return writingEnvironment(kind, opts);
}
