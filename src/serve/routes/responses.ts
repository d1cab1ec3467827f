/**
 * POST /v1/responses: OpenAI's Responses API, for clients written against it (the iterative
 * trainers' API comparator among them). One completion per request, text in and out, no stream,
 * nothing stored: the chat route's generation with a response around it.
 */
import { randomUUID } from 'node:crypto';
import type { Route } from '../context.js';
import { chatChoice } from '../format.js';
import { responsesJob } from '../validate.js';
import { type Dialect, generate } from './generate.js';

const RESPONSES: Dialect = {
  idPrefix: 'resp',
  object: 'response',
  choice: chatChoice,
  answer: ({ id, created, model, choices, usage }) => {
    const c = choices[0] as ReturnType<typeof chatChoice>;
    const cut = c.finish_reason === 'length';
    const status = cut ? 'incomplete' : 'completed';
    return {
      id: id.replace('-', '_'),
      object: 'response',
      created_at: created,
      status,
      incomplete_details: cut ? { reason: 'max_output_tokens' } : null,
      model,
      output: [
        {
          type: 'message',
          id: `msg_${randomUUID().replaceAll('-', '')}`,
          status,
          role: 'assistant',
          content: [{ type: 'output_text', text: c.message.content, annotations: [] }],
        },
      ],
      usage: { input_tokens: usage.prompt_tokens, output_tokens: usage.completion_tokens, total_tokens: usage.total_tokens },
    };
  },
};

export const responses: Route = (ctx, res, body) => generate(ctx, res, RESPONSES, responsesJob(ctx, body));
