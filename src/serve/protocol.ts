/**
 * The request bodies `magrpo serve` accepts: the subset of OpenAI's completions and chat
 * completions APIs it implements, plus vLLM's extensions (return_tokens_as_token_ids,
 * skip_special_tokens, include_stop_str_in_output, stop_token_ids, ignore_eos, return_token_ids)
 * and vLLM's tokenize / detokenize / LoRA bodies. Unknown fields are ignored, as both servers do;
 * fields that would change the output in ways this server cannot honour are rejected.
 */
import { z } from 'zod';

const tokenIds = z.array(z.number().int().min(0)).min(1);

/** Sampling fields shared by both generation endpoints. */
const sampling = {
  model: z.string().optional().describe('base model or adapter name (default: the base model)'),
  n: z.number().int().min(1).max(256).default(1).describe('completions per prompt'),
  temperature: z.number().min(0).max(100).default(1).describe('0 = greedy'),
  top_p: z.number().gt(0).max(1).default(1).describe('nucleus sampling threshold'),
  top_k: z.number().int().min(-1).nullable().optional().describe('keep the k most likely tokens (-1, 0 or null = off)'),
  stop: z
    .union([z.string(), z.array(z.string()).max(16)])
    .nullable()
    .optional()
    .describe('stop strings'),
  stop_token_ids: z.array(z.number().int().min(0)).max(64).optional().describe('vLLM: stop after any of these tokens too'),
  ignore_eos: z.boolean().default(false).describe('vLLM: do not stop at EOS'),
  seed: z.number().int().min(0).max(0xffffffff).nullable().optional().describe('seed of this request: same seed and body, same completions'),
  stream: z.boolean().default(false),
  stream_options: z
    .object({ include_usage: z.boolean().default(false) })
    .nullable()
    .optional(),
  skip_special_tokens: z.boolean().default(true).describe('vLLM: leave special tokens out of the text'),
  include_stop_str_in_output: z.boolean().default(false).describe('vLLM: keep the stop string (or stop token text) in the text'),
  return_tokens_as_token_ids: z.boolean().default(false).describe('vLLM: logprob tokens as "token_id:123"'),
  return_token_ids: z.boolean().default(false).describe('vLLM: add prompt_token_ids and token_ids to each choice'),
  presence_penalty: z.literal(0).optional().describe('only 0 is supported'),
  frequency_penalty: z.literal(0).optional().describe('only 0 is supported'),
  repetition_penalty: z.literal(1).optional().describe('only 1 is supported'),
  logit_bias: z.record(z.string(), z.number()).nullable().optional(),
  user: z.string().optional(),
};

export const CompletionRequest = z.object({
  ...sampling,
  prompt: z.union([z.string(), z.array(z.string()).min(1), tokenIds, z.array(tokenIds).min(1)]).describe('text, token ids, or a list of either'),
  max_tokens: z.number().int().min(1).nullable().default(16).describe('tokens to generate per completion'),
  logprobs: z.number().int().min(0).max(20).nullable().optional().describe('report the chosen token and this many most likely ones'),
  echo: z.literal(false).optional().describe('only false is supported'),
  suffix: z.null().optional().describe('not supported'),
  best_of: z.number().int().nullable().optional(),
});
export type CompletionRequest = z.infer<typeof CompletionRequest>;

const textPart = z.object({ type: z.literal('text'), text: z.string() });

export const ChatMessage = z.object({
  role: z.string().min(1),
  content: z.union([z.string(), z.array(textPart), z.null()]).describe('text, or a list of {type: "text", text} parts'),
  name: z.string().optional(),
});

export const ChatRequest = z.object({
  ...sampling,
  messages: z.array(ChatMessage).min(1),
  max_tokens: z.number().int().min(1).nullable().optional(),
  max_completion_tokens: z.number().int().min(1).nullable().optional(),
  logprobs: z.boolean().default(false),
  top_logprobs: z.number().int().min(0).max(20).nullable().optional(),
  add_generation_prompt: z.boolean().default(true).describe('vLLM: end the prompt with the assistant turn header'),
  tools: z.array(z.unknown()).max(0).optional().describe('tools are not supported'),
});
export type ChatRequest = z.infer<typeof ChatRequest>;

/** Sampling fields of the two single-completion APIs below (no n, no logprobs, no stream). */
const singleSampling = {
  model: z.string().optional().describe('base model or adapter name (default: the base model)'),
  temperature: z.number().min(0).max(100).default(1).describe('0 = greedy'),
  top_p: z.number().gt(0).max(1).default(1).describe('nucleus sampling threshold'),
  stream: z.literal(false).optional().describe('streaming is not supported on this endpoint'),
  seed: z.number().int().min(0).max(0xffffffff).nullable().optional().describe('magrpo: seed of this request'),
};

const anthropicText = z.object({ type: z.literal('text'), text: z.string() });
const anthropicContent = z.union([z.string(), z.array(anthropicText).min(1)]).describe('text, or a list of {type: "text", text} blocks');

/** Anthropic's Messages API (POST /v1/messages): the subset of text in and text out. */
export const MessagesRequest = z.object({
  ...singleSampling,
  max_tokens: z.number().int().min(1).describe('tokens to generate (required, as in Anthropic’s API)'),
  messages: z.array(z.object({ role: z.enum(['user', 'assistant']), content: anthropicContent })).min(1),
  system: anthropicContent.optional().describe('the system prompt'),
  top_k: z.number().int().min(1).optional().describe('keep the k most likely tokens'),
  stop_sequences: z.array(z.string()).max(16).optional(),
  tools: z.array(z.unknown()).max(0).optional().describe('tools are not supported'),
  metadata: z.unknown().optional(),
});
export type MessagesRequest = z.infer<typeof MessagesRequest>;

const responsesPart = z.object({ type: z.enum(['input_text', 'output_text', 'text']), text: z.string() });

/** OpenAI's Responses API (POST /v1/responses): the subset of text in and text out. */
export const ResponsesRequest = z.object({
  ...singleSampling,
  input: z
    .union([
      z.string(),
      z
        .array(
          z.object({
            role: z.enum(['user', 'assistant', 'system', 'developer']),
            content: z.union([z.string(), z.array(responsesPart).min(1)]),
            type: z.literal('message').optional(),
          }),
        )
        .min(1),
    ])
    .describe('text, or a list of messages'),
  instructions: z.string().nullable().optional().describe('the system prompt'),
  max_output_tokens: z.number().int().min(1).nullable().optional(),
  tools: z.array(z.unknown()).max(0).optional().describe('tools are not supported'),
  previous_response_id: z.null().optional().describe('not supported: this server keeps no responses'),
  store: z.boolean().optional(),
});
export type ResponsesRequest = z.infer<typeof ResponsesRequest>;

export const TokenizeRequest = z.union([
  z.object({ model: z.string().optional(), prompt: z.string(), add_special_tokens: z.boolean().default(true), return_token_strs: z.boolean().default(false) }),
  z.object({
    model: z.string().optional(),
    messages: z.array(ChatMessage).min(1),
    add_generation_prompt: z.boolean().default(true),
    add_special_tokens: z.boolean().default(false),
    return_token_strs: z.boolean().default(false),
  }),
]);

export const DetokenizeRequest = z.object({ model: z.string().optional(), tokens: z.array(z.number().int()) });

export const LoadLoraRequest = z.object({ lora_name: z.string().min(1).max(200), lora_path: z.string().min(1) });
export const UnloadLoraRequest = z.object({ lora_name: z.string().min(1), lora_int_id: z.number().int().optional() });

/** A chat message's text (parts joined). */
export function messageText(m: z.infer<typeof ChatMessage>): string {
  if (m.content === null) return '';
  return typeof m.content === 'string' ? m.content : m.content.map((p) => p.text).join('');
}

/**
 * The prompt when the tokenizer has no chat template: each message as "<role>: <text>\n", then
 * "assistant: " when a generation prompt is asked for.
 */
export function plainChatPrompt(messages: readonly { role: string; content: string }[], addGenerationPrompt: boolean): string {
  return messages.map((m) => `${m.role}: ${m.content}\n`).join('') + (addGenerationPrompt ? 'assistant: ' : '');
}

/** "field.sub: message; …" from a zod error, plus the first field's path as OpenAI's `param`. */
export function describeIssues(err: z.ZodError): { message: string; param: string | null } {
  const parts = err.issues.map((i) => (i.path.length ? `${i.path.join('.')}: ${i.message}` : i.message));
  const first = err.issues[0]?.path.join('.') || null;
  return { message: parts.join('; '), param: first };
}
