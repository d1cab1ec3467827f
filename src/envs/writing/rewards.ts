/**
 * The gated writing rewards of the MAGRPO paper (docs/environments.md "TL;DR reward" and "arXiv
 * reward"; OpenMLRL/LLM_Collab_Writing rewards/tldr_rewards.py and rewards/arxiv_rewards.py). Four
 * levels, each reached only when the previous one passed:
 *
 *   L1 structure     both whitespace token counts in range                 +0.5, else total 0
 *   L2 coordination  r = len(c2)/len(c1) in code points, banded            [0, 1], else stop
 *   L3 vocabulary    u = uniq(c2)/uniq(c1), stopwords INCLUDED, banded     [0, 0.5], else stop
 *   L4 style         0.4·transition_scale + 0.6·min(J, cap)/cap            [0, 0.98]
 *
 * "Passed" is the band test, not a positive value: r = 1.1 (TLDR) scores L2 = 0 and goes on. Each
 * band is written in the source's own arithmetic order so results match it to the last bit.
 */
import type { ArxivVersion } from './options.js';
import { charLength, jaccard, tokenCount, transitionCategories, transitionScale, uniqueWordCount } from './text-stats.js';

/** Reward components, logged by the trainer as `turn_1/reward/<name>`. */
export type WritingComponents = {
  /** L1 (0 or 0.5). */
  structure: number;
  /** L2 (0–1). */
  coordination: number;
  /** L3 (0–0.5). */
  vocabulary: number;
  /** 0.4 · transition_scale (part of L4). */
  transition: number;
  /** 0.6 · min(J, cap) / cap (part of L4). */
  jaccard: number;
};

export interface WritingReward {
  reward: number;
  components: WritingComponents;
}

/**
 * The four levels computed independently; null marks a failed gate (the gated reward stops
 * there). Ungated values, as the authors' loggers report them, are `level ?? 0`.
 */
export interface WritingLevels {
  structure: number | null;
  coordination: number | null;
  vocabulary: number | null;
  transition: number;
  jaccard: number;
}

interface LevelSpec {
  tokens: readonly [number, number];
  length: (r: number) => number | null;
  vocab: (u: number) => number | null;
  jaccardCap: number;
  /** The text searched for transition words. */
  transitionText: (c1: string, c2: string) => string;
}

const TLDR: LevelSpec = {
  tokens: [8, 256],
  length: (r) => {
    if (1.6 <= r && r <= 3.2) return 1;
    // The source's comment says "/ 0.4"; the code divides by 1.6 − 1.1.
    if (1.1 <= r && r < 1.6) return (r - 1.1) / (1.6 - 1.1);
    if (3.2 < r && r <= 5.0) return 1 - (r - 3.2) / (5.0 - 3.2);
    return null;
  },
  vocab: (u) => {
    if (u >= 2.0) return 0.5;
    if (1.3 <= u && u < 2.0) return ((u - 1.3) / (2.0 - 1.3)) * 0.5;
    return null;
  },
  jaccardCap: 0.03,
  transitionText: (_c1, c2) => c2,
};

const arxivVocab = (u: number): number | null => {
  if (0.7 <= u && u <= 1.3) return 0.5;
  if (0.5 <= u && u < 0.7) return (0.5 * (u - 0.5)) / (0.7 - 0.5);
  if (1.3 < u && u <= 1.7) return 0.5 * (1 - (u - 1.3) / (1.7 - 1.3));
  return null;
};

const ARXIV: Record<ArxivVersion, LevelSpec> = {
  paper: {
    tokens: [128, 256],
    length: (r) => {
      if (1.0 <= r && r <= 1.3) return 1;
      if (0.8 <= r && r < 1.0) return (r - 0.8) / (1.0 - 0.8);
      if (1.3 < r && r <= 1.5) return 1 - (r - 1.3) / (1.5 - 1.3);
      return null;
    },
    vocab: arxivVocab,
    jaccardCap: 0.23,
    // Concatenated with no separator, so a transition word can straddle the seam.
    transitionText: (c1, c2) => c1 + c2,
  },
  latest: {
    tokens: [128, 256],
    length: (r) => {
      if (1.3 <= r && r <= 1.6) return 1;
      if (0.8 <= r && r < 1.3) return (r - 0.8) / (1.3 - 0.8);
      if (1.6 < r && r <= 2.0) return 1 - (r - 1.6) / (2.0 - 1.6);
      return null;
    },
    vocab: arxivVocab,
    jaccardCap: 0.23,
    transitionText: (c1, c2) => c1 + c2,
  },
};

function levels(c1: string, c2: string, spec: LevelSpec): WritingLevels {
  const [lo, hi] = spec.tokens;
  const inRange = (t: string) => {
    const n = tokenCount(t);
    return lo <= n && n <= hi;
  };
  const len1 = charLength(c1);
  const uniq1 = uniqueWordCount(c1);
  const j = Math.min(jaccard(c1, c2), spec.jaccardCap) / spec.jaccardCap;
  return {
    structure: inRange(c1) && inRange(c2) ? 0.5 : null,
    coordination: len1 === 0 ? null : spec.length(charLength(c2) / len1),
    vocabulary: uniq1 === 0 ? null : spec.vocab(uniqueWordCount(c2) / uniq1),
    transition: 0.4 * transitionScale(transitionCategories(spec.transitionText(c1, c2)).length),
    jaccard: 0.6 * j,
  };
}

/** Applies the gates: levels after the first failed one score 0. */
export function gate(l: WritingLevels): WritingReward {
  const components: WritingComponents = { structure: 0, coordination: 0, vocabulary: 0, transition: 0, jaccard: 0 };
  let reward = 0;
  if (l.structure === null) return { reward, components };
  reward += components.structure = l.structure;
  if (l.coordination === null) return { reward, components };
  reward += components.coordination = l.coordination;
  if (l.vocabulary === null) return { reward, components };
  reward += components.vocabulary = l.vocabulary;
  components.transition = l.transition;
  components.jaccard = l.jaccard;
  reward += l.transition + l.jaccard;
  return { reward, components };
}

/** Every level scored independently, summed as the authors' loggers do ("ungated_total_reward"). */
export function ungated(l: WritingLevels): WritingReward {
  const components: WritingComponents = {
    structure: l.structure ?? 0,
    coordination: l.coordination ?? 0,
    vocabulary: l.vocabulary ?? 0,
    transition: l.transition,
    jaccard: l.jaccard,
  };
  const c = components;
  return { reward: c.structure + c.coordination + c.vocabulary + (c.jaccard + c.transition), components };
}

/** TLDR levels: c1 the concise summary, c2 the detailed one; transitions searched in c2 only. */
export function tldrLevels(c1: string, c2: string): WritingLevels {
  return levels(c1, c2, TLDR);
}

/** arXiv levels: c1 background/motivation, c2 methodology/implications. */
export function arxivLevels(c1: string, c2: string, opts: { version: ArxivVersion }): WritingLevels {
  return levels(c1, c2, ARXIV[opts.version]);
}

/** `tldr_combined_reward` for one joint action (max 2.98). */
export function tldrReward(c1: string, c2: string): WritingReward {
  return gate(tldrLevels(c1, c2));
}

/** `arxiv_combined_reward` for one joint action (max 2.98); `version` picks the L2 band. */
export function arxivReward(c1: string, c2: string, opts: { version: ArxivVersion }): WritingReward {
  return gate(arxivLevels(c1, c2, opts));
}

/** Mean components of a set of episodes, normalised as in the paper's plots (in %). */
export interface WritingMetrics {
  /** (L1 + L2 + L3) / 2. */
  structure: number;
  /** transition / 0.4 ("logical coherence"). */
  coherence: number;
  /** jaccard / 0.6 ("style consistency"). */
  consistency: number;
  /** total / 3. */
  return: number;
}

/** The paper's normalised metrics (plotting/plot_writing.py @3198dc9) of mean components, in %. */
export function normalisedMetrics(rewards: readonly WritingReward[]): WritingMetrics {
  const n = Math.max(1, rewards.length);
  const mean = (f: (r: WritingReward) => number) => rewards.reduce((s, r) => s + f(r), 0) / n;
  return {
    structure: (100 * mean((r) => r.components.structure + r.components.coordination + r.components.vocabulary)) / 2,
    coherence: (100 * mean((r) => r.components.transition)) / 0.4,
    consistency: (100 * mean((r) => r.components.jaccard)) / 0.6,
    return: (100 * mean((r) => r.reward)) / 3,
  };
}
