/**
 * POST /v1/messages: Anthropic's Messages API, for clients written against it (the iterative
 * trainers' API comparator among them). One completion per request, text in and out, no stream:
 * the chat route's generation with Anthropic's answer around it.
 */
import type { Route } from '../context.js';
import { chatChoice } from '../format.js';
import { messagesJob } from '../validate.js';
import { type Dialect, generate } from './generate.js';

/** OpenAI's finish of a chat choice as Anthropic's stop_reason and stop_sequence. */
export function anthropicStop(choice: { finish_reason: string | null; stop_reason: string | number | null }) {
  if (choice.finish_reason === 'length') return { stop_reason: 'max_tokens', stop_sequence: null };
  if (typeof choice.stop_reason === 'string') return { stop_reason: 'stop_sequence', stop_sequence: choice.stop_reason };
  return { stop_reason: 'end_turn', stop_sequence: null };
}

const MESSAGES: Dialect = {
  idPrefix: 'msg',
  object: 'message',
  choice: chatChoice,
  answer: ({ id, model, choices, usage }) => {
    const c = choices[0] as ReturnType<typeof chatChoice>;
    return {
      id: id.replace('-', '_'),
      type: 'message',
      role: 'assistant',
      model,
      content: [{ type: 'text', text: c.message.content }],
      ...anthropicStop(c),
      usage: { input_tokens: usage.prompt_tokens, output_tokens: usage.completion_tokens },
    };
  },
};

export const messages: Route = (ctx, res, body) => generate(ctx, res, MESSAGES, messagesJob(ctx, body));
