/**
 * Options of the writing environments (`env.options` of tldr and arxiv): the one declaration the
 * config check, the JSON Schema and the environment factories (writing/index.ts) share.
 */
import { z } from 'zod';
import { dataDirOption } from '../options.js';

const promptStyle = z
  .enum(['instruct', 'chat', 'completion'])
  .default('instruct')
  .describe(
    "prompt wording: 'instruct' (the paper's, as raw text), 'chat' (the paper's as the user turn of each model's chat template: instruction-tuned models, which need one) or 'completion' (source text + the opening of the agent's paragraph, for base models)",
  );

/** A linear ramp of one measure: factor 0 at and below zero_at, 1 at and above full_at. */
const ramp = (zeroAt: z.ZodNumber, fullAt: z.ZodNumber) =>
  z
    .strictObject({ zero_at: zeroAt, full_at: fullAt })
    .refine((g) => g.full_at > g.zero_at, { message: 'full_at must be greater than zero_at', path: ['full_at'] });

const fluencyGuard = z
  .strictObject({
    zero_at: z.number().min(0).lt(1).default(0).describe('word validity (share of letters in real words) at and below which an agent’s factor is 0'),
    full_at: z.number().gt(0).max(1).describe('word validity at and above which an agent’s factor is 1 (linear in between)'),
    distinct_2: ramp(z.number().min(0).lt(1), z.number().gt(0).max(1))
      .optional()
      .describe('also scale by a ramp on distinct-2 (unique word bigrams / bigrams): repeated phrases of real words'),
    grammar: ramp(z.number().min(0).lt(1), z.number().gt(0).max(1))
      .optional()
      .describe('also scale by a ramp on grammar validity (share of function-word trigrams found in English prose): real words in no English order'),
    clause_length: ramp(z.number().min(0), z.number().gt(0))
      .optional()
      .describe('also scale by a ramp on mean words per clause (between punctuation marks): lists of fragments of real words'),
  })
  .refine((g) => g.full_at > g.zero_at, { message: 'full_at must be greater than zero_at', path: ['full_at'] });

const faithfulnessGuard = z.strictObject({
  support: ramp(z.number().min(0).lt(1), z.number().gt(0).max(1)).describe(
    'ramp on content support (share of an agent’s content words that occur in the post, text/faithfulness.ts): text about something else earns nothing at and below zero_at',
  ),
  copied: z
    .strictObject({
      full_at: z.number().min(0).lt(1).describe('share of an agent’s words in 8-word runs copied from the post at and below which its factor is 1'),
      zero_at: z.number().gt(0).max(1).describe('share at and above which its factor is 0 (linear in between)'),
    })
    .refine((g) => g.zero_at > g.full_at, { message: 'zero_at must be greater than full_at', path: ['zero_at'] })
    .optional()
    .describe('also a falling ramp on copying, so that pasting the post is not the way to support'),
  agents: z
    .array(z.number().int().min(0).max(1))
    .min(1)
    .optional()
    .describe(
      'the agents (0-based) whose completions the guard scores (default: both); [0] scores the concise summary alone and leaves the detailed rewrite to the paper reward',
    ),
});

export const TldrOptionsSchema = z.strictObject({
  data_dir: dataDirOption,
  faithfulness_guard: z
    .union([faithfulnessGuard, z.array(faithfulnessGuard).min(1)])
    .nullable()
    .default(null)
    .describe(
      '(magrpo) training-reward guard for summaries: reward × Π_i ramp(content_support_i) × Π_i ramp(copied_i); a list of guards multiplies their factors (ramps of their own per agent); eval tables keep the paper reward and report the same measures beside ones no guard optimises (bigram support, ROUGE-L, echo, ref NLL)',
    ),
  fluency_guard: fluencyGuard
    .nullable()
    .default(null)
    .describe(
      '(magrpo) training-reward guard against reward hacking: reward × Π_i clamp((word_validity_i − zero_at) / (full_at − zero_at), 0, 1); eval tables keep the paper reward (docs/reward-hacking.md)',
    ),
  prompt_style: promptStyle,
});

export const ArxivOptionsSchema = TldrOptionsSchema.extend({
  version: z.enum(['paper', 'latest']).default('paper').describe("the reward's L2 band: paper (1.0–1.3) or latest (1.3–1.6)"),
});

/** tldr options as a caller gives them (every key optional). */
export type TldrOptions = z.input<typeof TldrOptionsSchema>;
/** arxiv options as a caller gives them (every key optional). */
export type ArxivOptions = z.input<typeof ArxivOptionsSchema>;
export type WritingPromptStyle = z.output<typeof promptStyle>;
/** The fluency guard with its defaults filled in. */
export type FluencyGuard = z.output<typeof fluencyGuard>;
/** One faithfulness guard (`faithfulness_guard` may also be a list of them). */
export type FaithfulnessGuard = z.output<typeof faithfulnessGuard>;
/** A ramp of the fluency guard: factor 0 at and below zero_at, 1 at and above full_at. */
export type FluencyRamp = NonNullable<FluencyGuard['distinct_2']>;
/** arXiv L2 band: 'paper' = the paper-era code (@3198dc9), 'latest' = the 2025-12-31 change. */
export type ArxivVersion = z.output<typeof ArxivOptionsSchema>['version'];
