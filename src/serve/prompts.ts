/** Request text to token ids: plain prompts, and chat messages through the tokenizer's chat template. */
import { CheckpointError } from '../model/errors.js';
import type { LanguageModel } from '../model/pretrained.js';
import { HttpError } from './http.js';
import { type ChatRequest, messageText, plainChatPrompt } from './protocol.js';

export const encodeText = (lm: LanguageModel, text: string, special = true): number[] => lm.tokenizer.encode(text, { addSpecialTokens: special });

/**
 * The chat prompt's ids: the tokenizer's chat template (special tokens off by default: the
 * template writes them), or plainChatPrompt where the tokenizer has none (special tokens on).
 */
export function chatPromptIds(lm: LanguageModel, messages: ChatRequest['messages'], addGenerationPrompt: boolean, special?: boolean): number[] {
  const plain = messages.map((m) => ({ role: m.role, content: messageText(m) }));
  try {
    return encodeText(lm, lm.tokenizer.applyChatTemplate(plain, { addGenerationPrompt }), special ?? false);
  } catch (e) {
    if (!(e instanceof CheckpointError && e.code === 'NO_CHAT_TEMPLATE'))
      throw new HttpError(400, `chat template: ${(e as Error).message}`, 'invalid_request_error', 'messages');
    return encodeText(lm, plainChatPrompt(plain, addGenerationPrompt), special ?? true);
  }
}
