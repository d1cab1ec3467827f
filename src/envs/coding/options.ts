/**
 * Options of the coding environments (`env.options` of humaneval, coop-python, coding-jsonl): the
 * one declaration the config check, the JSON Schema and the environment factories (index.ts)
 * share. The feedback modes are described in feedback.ts, the aux penalty in reward.ts, the
 * prompt styles in prompt-style.ts.
 */
import { z } from 'zod';
import { dataDirOption } from '../options.js';

export const FEEDBACK_MODES = ['plain', 'passed', 'level_passed', 'level_feedback', 'expert_edits'] as const;

export const CodingOptionsSchema = z.strictObject({
  num_agents: z
    .union([z.literal(1), z.literal(2)])
    .default(2)
    .describe('2: helper + main agents; 1: one model writes the entry point (GRPO)'),
  aux_penalty: z
    .enum(['fixed', 'reference', 'off'])
    .default('fixed')
    .describe('penalty when main ignores the helper: fixed, reference (as the paper code), off'),
  feedback_mode: z
    .enum(FEEDBACK_MODES)
    .default('level_feedback')
    .describe('turn-2+ prompts (num_turns > 1): what the agents are told about their last attempt'),
  sandbox_slice: z
    .union([z.number().int(), z.literal('all')])
    .default(1)
    .describe('asserts run for feedback: N > 0 first N, N < 0 last |N|, 0 or all every one'),
  prompt_style: z
    .enum(['instruct', 'chat', 'code'])
    .default('instruct')
    .describe(
      "instruct: the paper's prompts as raw text; chat: the same as the user turn of each model's chat template (instruction-tuned models, which need one); code: code-completion prompts for base models such as models/small (single-turn)",
    ),
  original_prompt: z.boolean().default(true).describe('feedback prompts repeat the first-turn instructions'),
  previous_response: z.boolean().default(true).describe('feedback prompts repeat the previous function'),
});

export const CoopPythonOptionsSchema = CodingOptionsSchema.extend({ data_dir: dataDirOption });

export const CodingJsonlOptionsSchema = CodingOptionsSchema.extend({
  file: z.string().min(1).describe('training problems, HumanEval-format JSONL (relative to the config file)'),
  eval_file: z.string().min(1).optional().describe('evaluation problems in the same format (default: none)'),
});

/** Options of every coding environment as a caller gives them (every key optional). */
export type CodingOptions = z.input<typeof CodingOptionsSchema>;
export type CoopPythonOptions = z.input<typeof CoopPythonOptionsSchema>;
export type CodingJsonlOptions = z.input<typeof CodingJsonlOptionsSchema>;
/** Options of every coding environment, defaults filled in. */
export type ResolvedCodingOptions = z.output<typeof CodingOptionsSchema>;
export type FeedbackMode = ResolvedCodingOptions['feedback_mode'];
export type AuxPenaltyMode = ResolvedCodingOptions['aux_penalty'];
export type PromptStyleName = ResolvedCodingOptions['prompt_style'];
