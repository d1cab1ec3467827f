/**
 * A model folder's tokenizer: @huggingface/tokenizers for text <-> ids, @huggingface/jinja for
 * the chat template, plus the special-token ids generation needs.
 *
 * Files read (kept verbatim so saveTo writes back exactly what was loaded):
 *   tokenizer.json           required: vocabulary, merges, pre/post-processing
 *   tokenizer_config.json    optional: bos/eos/pad/unk tokens, chat_template
 *   special_tokens_map.json  optional: overrides the special tokens above, as transformers does
 *   chat_template.jinja      optional: newer transformers store the template here instead
 * and, for stop/bos ids only, generation_config.json (or config.json when it is absent).
 */
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Template } from '@huggingface/jinja';
import { Tokenizer } from '@huggingface/tokenizers';
import { writeFileAtomic } from './atomic-write.js';
import { type GenerationDefaults, parseGenerationConfig, readGenerationConfig } from './config.js';
import { CheckpointError } from './errors.js';

export interface ChatMessage {
  role: string;
  content: string;
}

/**
 * A prompt as a formatter gives it: plain text, or chat messages that the model's chat template
 * renders (TRL's conversational prompts). `promptIds` turns either into token ids.
 */
export type Prompt = string | readonly ChatMessage[];

const TOKENIZER_FILES = ['tokenizer.json', 'tokenizer_config.json', 'special_tokens_map.json', 'chat_template.jinja'] as const;
export type TokenizerFile = (typeof TOKENIZER_FILES)[number];
const SPECIAL_TOKEN_KEYS = ['bos_token', 'eos_token', 'pad_token', 'unk_token'] as const;
type SpecialTokenKey = (typeof SPECIAL_TOKEN_KEYS)[number];

export class TextTokenizer {
  /** Number of ids the tokenizer can produce (base vocabulary + added tokens); may be below config.vocabSize. */
  readonly vocabSize: number;
  readonly bosId: number | null;
  readonly eosId: number;
  /** tokenizer's pad token, else eos (as CoMLRL's apply_tokenizer_specials does). */
  readonly padId: number;
  /** Every id that ends generation: eosId plus generation_config's (or config's) eos_token_id. */
  readonly eosIds: number[];

  private constructor(
    private readonly tokenizer: Tokenizer,
    private readonly files: ReadonlyMap<TokenizerFile, string>,
    private readonly specialTokens: Partial<Record<SpecialTokenKey, string>>,
    private readonly chatTemplate: Template | null,
    private readonly templateFile: string,
    ids: { bos: number | null; eos: number; pad: number; eosIds: number[] },
  ) {
    let maxId = -1;
    for (const id of tokenizer.get_vocab(true).values()) maxId = Math.max(maxId, id);
    this.vocabSize = maxId + 1;
    this.bosId = ids.bos;
    this.eosId = ids.eos;
    this.padId = ids.pad;
    this.eosIds = ids.eosIds;
  }

  static fromDir(dir: string): TextTokenizer {
    const tokenizerFile = join(dir, 'tokenizer.json');
    if (!existsSync(tokenizerFile)) {
      throw new CheckpointError(
        'TOKENIZER_MISSING',
        tokenizerFile,
        'no tokenizer.json in the model folder',
        'save the tokenizer with a fast (Rust-backed) Hugging Face tokenizer, which writes tokenizer.json',
      );
    }
    const files = new Map<TokenizerFile, string>();
    for (const name of TOKENIZER_FILES) {
      const file = join(dir, name);
      if (existsSync(file)) files.set(name, readFileSync(file, 'utf8'));
    }
    return TextTokenizer.fromFiles(files, dir, generationIds(dir));
  }

  /**
   * A tokenizer from the texts of its files (tokenizer.json required), as if they were in the
   * folder `dir` (which names them in errors); `generation` supplies the generation_config ids.
   */
  static fromFiles(files: ReadonlyMap<TokenizerFile, string>, dir: string, generation: GenerationDefaults): TextTokenizer {
    const tokenizerFile = join(dir, 'tokenizer.json');
    if (!files.has('tokenizer.json'))
      throw new CheckpointError('TOKENIZER_MISSING', tokenizerFile, 'no tokenizer.json', 'save the tokenizer with a fast Hugging Face tokenizer');
    const configFile = join(dir, 'tokenizer_config.json');
    const config: Record<string, unknown> = { ...parseObject(files.get('tokenizer_config.json'), configFile) };
    // transformers lets special_tokens_map.json override tokenizer_config.json.
    const specialMap = parseObject(files.get('special_tokens_map.json'), join(dir, 'special_tokens_map.json'));
    for (const key of [...SPECIAL_TOKEN_KEYS, 'additional_special_tokens']) {
      if (specialMap[key] !== undefined) config[key] = specialMap[key];
    }
    const specialTokens: Partial<Record<SpecialTokenKey, string>> = {};
    for (const key of SPECIAL_TOKEN_KEYS) {
      const content = tokenContent(config[key]);
      if (content !== null) specialTokens[key] = content;
      config[key] = content;
    }
    config.additional_special_tokens = ((config.additional_special_tokens as unknown[] | undefined) ?? []).map(tokenContent).filter((t) => t !== null);
    // transformers now defaults to false; the JS library still defaults to true, which changes decoded text.
    config.clean_up_tokenization_spaces ??= false;

    let tokenizer: Tokenizer;
    const tokenizerJson = parseObject(files.get('tokenizer.json'), tokenizerFile);
    checkTokenizerShape(tokenizerJson, tokenizerFile);
    try {
      tokenizer = new Tokenizer(tokenizerJson, config);
    } catch (err) {
      throw new CheckpointError(
        'CORRUPT',
        tokenizerFile,
        `cannot build the tokenizer (${(err as Error).message})`,
        're-save the tokenizer with a recent transformers',
      );
    }

    const idOf = (key: SpecialTokenKey): number | null => {
      const token = specialTokens[key];
      if (token === undefined) return null;
      const id = tokenizer.token_to_id(token);
      if (id === undefined) {
        throw new CheckpointError(
          'BAD_CONFIG',
          configFile,
          `${key} ${JSON.stringify(token)} is not in tokenizer.json's vocabulary`,
          `set ${key} to a token that exists`,
        );
      }
      return id;
    };
    const generationEos = [generation.eosTokenId ?? []].flat();
    const eos = idOf('eos_token') ?? generationEos[0];
    if (eos === undefined) {
      throw new CheckpointError(
        'BAD_CONFIG',
        configFile,
        'no eos token in tokenizer_config.json, special_tokens_map.json, generation_config.json or config.json',
        'set "eos_token" in tokenizer_config.json',
      );
    }
    const ids = {
      bos: idOf('bos_token') ?? generation.bosTokenId ?? null,
      eos,
      pad: idOf('pad_token') ?? eos,
      eosIds: [...new Set([eos, ...generationEos])],
    };

    const { template, file: templateFile } = chatTemplateSource(dir, files, config);
    let chatTemplate: Template | null = null;
    if (template !== null) {
      try {
        chatTemplate = new Template(template);
      } catch (err) {
        throw new CheckpointError('CORRUPT', templateFile, `chat template does not parse (${(err as Error).message})`, 'fix the Jinja chat template');
      }
    }
    return new TextTokenizer(tokenizer, files, specialTokens, chatTemplate, templateFile, ids);
  }

  /** `addSpecialTokens` (default true, as in transformers) runs the post-processor, e.g. prepending BOS. */
  encode(text: string, { addSpecialTokens = true }: { addSpecialTokens?: boolean } = {}): number[] {
    return this.tokenizer.encode(text, { add_special_tokens: addSpecialTokens }).ids;
  }

  decode(ids: readonly number[], { skipSpecialTokens = false }: { skipSpecialTokens?: boolean } = {}): string {
    if (ids.length === 0) return '';
    for (const id of ids) {
      if (!Number.isInteger(id) || id < 0 || id >= this.vocabSize) throw new RangeError(`token id ${id} is outside the vocabulary [0, ${this.vocabSize})`);
    }
    return this.tokenizer.decode([...ids], { skip_special_tokens: skipSpecialTokens });
  }

  tokenToId(token: string): number | undefined {
    return this.tokenizer.token_to_id(token);
  }

  /**
   * Renders the chat template with the same variables transformers passes: messages,
   * add_generation_prompt and the special-token strings. Returns text; encode it with
   * addSpecialTokens: false, since the template already places any BOS.
   */
  applyChatTemplate(messages: readonly ChatMessage[], { addGenerationPrompt = false }: { addGenerationPrompt?: boolean } = {}): string {
    if (this.chatTemplate === null) {
      throw new CheckpointError(
        'NO_CHAT_TEMPLATE',
        this.templateFile,
        'this tokenizer has no chat_template',
        'use an instruct/chat checkpoint, or format prompts as plain text',
      );
    }
    return this.chatTemplate.render({
      ...this.specialTokens,
      messages: messages.map((m) => ({ ...m })),
      add_generation_prompt: addGenerationPrompt,
    });
  }

  get hasChatTemplate(): boolean {
    return this.chatTemplate !== null;
  }

  /** The text a prompt's ids encode: text as it is; messages rendered by the chat template, generation prompt included. */
  renderPrompt(prompt: Prompt): string {
    if (typeof prompt === 'string') return prompt;
    if (this.chatTemplate === null) {
      throw new CheckpointError(
        'NO_CHAT_TEMPLATE',
        this.templateFile,
        'the prompt is a list of chat messages (a formatter returned messages, as env.options.prompt_style chat does), but this model has no chat template',
        'use a model whose tokenizer has a chat_template (an instruct/chat checkpoint), or plain-text prompts',
      );
    }
    return this.applyChatTemplate(prompt, { addGenerationPrompt: true });
  }

  /**
   * A prompt's token ids: the one place where prompts become ids, so sampling, scoring, the
   * learner, baselines and prompt-length filters agree token for token. Text is encoded with the
   * special tokens (e.g. BOS), as transformers encodes text; messages are rendered with the
   * generation prompt and encoded without them, since the template places any BOS itself (as TRL
   * does for conversational prompts).
   */
  promptIds(prompt: Prompt): number[] {
    return this.encode(this.renderPrompt(prompt), { addSpecialTokens: typeof prompt === 'string' });
  }

  /**
   * The special token that ends an assistant turn in the chat template (ChatML's <|im_end|>,
   * Llama 3's <|eot_id|>), read off a rendered exchange; null without a template, or when the
   * template ends a turn with ordinary text.
   */
  get chatEndId(): number | null {
    if (this.endOfTurn === undefined) this.endOfTurn = this.findChatEnd();
    return this.endOfTurn;
  }

  private endOfTurn: number | null | undefined;

  private findChatEnd(): number | null {
    if (this.chatTemplate === null) return null;
    const mark = 'magrpoEndOfTurnProbe';
    let text: string;
    try {
      text = this.applyChatTemplate([
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: mark },
      ]);
    } catch {
      return null;
    }
    const at = text.lastIndexOf(mark);
    if (at < 0) return null;
    const id = this.encode(text.slice(at + mark.length), { addSpecialTokens: false })[0];
    return id !== undefined && this.decode([id], { skipSpecialTokens: true }) === '' ? id : null;
  }

  /** The text of one of the tokenizer's files as loaded (undefined when it had none). */
  fileText(name: TokenizerFile): string | undefined {
    return this.files.get(name);
  }

  /** Writes the tokenizer files exactly as they were read (each atomically) into `dir`. */
  saveTo(dir: string): void {
    mkdirSync(dir, { recursive: true });
    for (const [name, text] of this.files) writeFileAtomic(join(dir, name), [text]);
  }
}

/** Special tokens are stored either as a string or as a serialized AddedToken {content, ...}. */
function tokenContent(value: unknown): string | null {
  if (typeof value === 'string') return value;
  if (typeof value === 'object' && value !== null && typeof (value as { content?: unknown }).content === 'string') {
    return (value as { content: string }).content;
  }
  return null;
}

/** transformers takes generation ids from generation_config.json, else derives them from config.json. */
function generationIds(dir: string): GenerationDefaults {
  if (existsSync(join(dir, 'generation_config.json'))) return readGenerationConfig(dir);
  const configFile = join(dir, 'config.json');
  if (!existsSync(configFile)) return {};
  const config = parseObject(readFileSync(configFile, 'utf8'), configFile);
  const { bos_token_id, eos_token_id, pad_token_id } = config;
  return parseGenerationConfig({ bos_token_id, eos_token_id, pad_token_id }, configFile);
}

function chatTemplateSource(
  dir: string,
  files: ReadonlyMap<TokenizerFile, string>,
  config: Record<string, unknown>,
): { template: string | null; file: string } {
  const jinjaFile = files.get('chat_template.jinja');
  if (jinjaFile !== undefined) return { template: jinjaFile, file: join(dir, 'chat_template.jinja') };
  const file = join(dir, 'tokenizer_config.json');
  const raw = config.chat_template;
  if (typeof raw === 'string') return { template: raw, file };
  // Several named templates: transformers uses the one called "default".
  if (Array.isArray(raw)) {
    const named = raw.find((t) => t?.name === 'default');
    if (typeof named?.template === 'string') return { template: named.template, file };
  }
  return { template: null, file };
}

/**
 * The parts of tokenizer.json the tokenizers library trusts without checking: a wrong type there
 * would load "fine" and fail (or silently mis-tokenise) at the first encode.
 */
function checkTokenizerShape(json: Record<string, unknown>, file: string): void {
  const bad = (problem: string) => new CheckpointError('CORRUPT', file, problem, 're-save the tokenizer with a recent transformers');
  const model = json.model;
  if (typeof model !== 'object' || model === null || Array.isArray(model)) throw bad('"model" is missing or not an object');
  const vocab = (model as { vocab?: unknown }).vocab;
  if (typeof vocab !== 'object' || vocab === null) throw bad('"model.vocab" is missing or not an object (or list)');
  const ids = Array.isArray(vocab) ? [] : Object.values(vocab);
  if (!ids.every((id) => Number.isSafeInteger(id) && (id as number) >= 0))
    throw bad('"model.vocab" maps tokens to something other than non-negative integer ids');
  const added = json.added_tokens;
  if (added !== undefined && added !== null) {
    const ok =
      Array.isArray(added) &&
      added.every((t) => typeof t === 'object' && t !== null && typeof t.content === 'string' && Number.isSafeInteger(t.id) && t.id >= 0);
    if (!ok) throw bad('"added_tokens" is not a list of {id, content} entries');
  }
  const merges = (model as { merges?: unknown }).merges;
  if (merges !== undefined && merges !== null && !Array.isArray(merges)) throw bad('"model.merges" is not a list');
}

function parseObject(text: string | undefined, file: string): Record<string, unknown> {
  if (text === undefined) return {};
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new CheckpointError('CORRUPT', file, `not valid JSON (${(err as Error).message})`, 're-save the tokenizer');
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    throw new CheckpointError('CORRUPT', file, 'top level is not a JSON object', 're-save the tokenizer');
  }
  return json as Record<string, unknown>;
}
