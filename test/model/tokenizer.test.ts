import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { CheckpointError } from '../../src/model/errors.js';
import { TextTokenizer } from '../../src/model/tokenizer.js';

const root = mkdtempSync(join(tmpdir(), 'magrpo-tokenizer-'));
after(() => rmSync(root, { recursive: true, force: true }));

/** GPT-2's reversible byte -> printable character map used by byte-level BPE. */
function bytesToUnicode(): string[] {
  const chars: string[] = [];
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    chars.push(String.fromCharCode(printable ? b : 256 + extra++));
  }
  return chars;
}

const MERGES = ['h e', 'l l', 'Ġ t', 'Ġt he', 'o r'];
const [HE, LL, _SP_T, SP_THE] = [256, 257, 258, 259];
const [ENDOFTEXT, IM_START, IM_END] = [261, 262, 263];

/** A tiny byte-level BPE tokenizer.json: ids 0-255 are the bytes, 256-260 merges, 261-263 special. */
function tokenizerJson(postProcessor: object): object {
  const vocab: Record<string, number> = {};
  bytesToUnicode().forEach((c, b) => {
    vocab[c] = b;
  });
  MERGES.forEach((m, i) => {
    vocab[m.replace(' ', '')] = 256 + i;
  });
  const special = (id: number, content: string) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true });
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [special(ENDOFTEXT, '<|endoftext|>'), special(IM_START, '<|im_start|>'), special(IM_END, '<|im_end|>')],
    normalizer: { type: 'NFC' },
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
    post_processor: postProcessor,
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: '',
      end_of_word_suffix: '',
      fuse_unk: false,
      byte_fallback: false,
      vocab,
      merges: MERGES,
    },
  };
}

const BYTE_LEVEL_POST = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: true };
const BOS_POST = {
  type: 'TemplateProcessing',
  single: [{ SpecialToken: { id: '<|endoftext|>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
  pair: [{ SpecialToken: { id: '<|endoftext|>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { Sequence: { id: 'B', type_id: 1 } }],
  special_tokens: { '<|endoftext|>': { id: '<|endoftext|>', ids: [ENDOFTEXT], tokens: ['<|endoftext|>'] } },
};

/** ChatML as Qwen2.5 renders it when no tools are given (default system prompt included). */
const CHATML_TEMPLATE =
  "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}" +
  "{%- else %}{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{%- endif %}" +
  "{%- for message in messages %}{%- if not (message.role == 'system' and loop.first) %}" +
  "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}{%- endif %}{%- endfor %}" +
  "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

function writeFolder(files: Record<string, unknown>): string {
  const dir = mkdtempSync(join(root, 'm-'));
  for (const [name, content] of Object.entries(files)) {
    writeFileSync(join(dir, name), typeof content === 'string' ? content : JSON.stringify(content, null, 2));
  }
  return dir;
}

/** Qwen2.5-Instruct-like: no BOS, eos <|im_end|>, pad <|endoftext|>, ChatML template, two stop ids. */
const qwenLike = () =>
  writeFolder({
    'tokenizer.json': tokenizerJson(BYTE_LEVEL_POST),
    'tokenizer_config.json': {
      bos_token: null,
      eos_token: '<|im_end|>',
      pad_token: '<|endoftext|>',
      chat_template: CHATML_TEMPLATE,
      clean_up_tokenization_spaces: false,
      model_max_length: 131072,
    },
    'generation_config.json': { bos_token_id: ENDOFTEXT, eos_token_id: [IM_END, ENDOFTEXT], pad_token_id: ENDOFTEXT },
  });

/** GPT-2/Llama-like: post-processor prepends BOS, AddedToken-object specials, no pad, template in chat_template.jinja. */
const bosLike = () =>
  writeFolder({
    'tokenizer.json': tokenizerJson(BOS_POST),
    'tokenizer_config.json': { bos_token: { content: '<|endoftext|>', special: true }, eos_token: { content: '<|endoftext|>', special: true } },
    'special_tokens_map.json': { eos_token: '<|im_end|>' },
    'chat_template.jinja':
      "{{ bos_token }}{% for m in messages %}{% if m.role == 'tool' %}{{ raise_exception('tool messages are not supported') }}{% endif %}[{{ m.role }}] {{ m.content }}{{ eos_token }}{% endfor %}",
  });

describe('TextTokenizer', () => {
  test('round trips text exactly, including unicode, whitespace runs and special tokens', () => {
    const tok = TextTokenizer.fromDir(qwenLike());
    for (const text of [
      'the the',
      'Hello world!\n\n\tTabs  and   spaces  ',
      'naïve café — 日本語 🤗👍🏽',
      ' leading',
      '<|im_start|>user\nhi<|im_end|>',
      'a'.repeat(300),
    ]) {
      assert.equal(tok.decode(tok.encode(text)), text);
    }
  });

  test('applies the merges and maps special tokens to their ids', () => {
    const tok = TextTokenizer.fromDir(qwenLike());
    assert.deepEqual(tok.encode('the the'), [116, HE, SP_THE]);
    assert.deepEqual(tok.encode('hello'), [HE, LL, 111]);
    assert.deepEqual(tok.encode('<|im_start|>the<|im_end|>'), [IM_START, 116, HE, IM_END]);
    assert.equal(tok.tokenToId('Ġthe'), SP_THE);
    assert.equal(tok.tokenToId('<|im_end|>'), IM_END);
    assert.equal(tok.tokenToId('not-a-token'), undefined);
    assert.equal(tok.vocabSize, 264);
  });

  test('special ids come from tokenizer_config, stop ids also from generation_config', () => {
    const tok = TextTokenizer.fromDir(qwenLike());
    assert.deepEqual(
      { bos: tok.bosId, eos: tok.eosId, pad: tok.padId, stops: tok.eosIds },
      { bos: ENDOFTEXT, eos: IM_END, pad: ENDOFTEXT, stops: [IM_END, ENDOFTEXT] },
    );
  });

  test('addSpecialTokens runs the post-processor; skipSpecialTokens drops specials when decoding', () => {
    const tok = TextTokenizer.fromDir(bosLike());
    assert.deepEqual(tok.encode('the'), [ENDOFTEXT, 116, HE]);
    assert.deepEqual(tok.encode('the', { addSpecialTokens: false }), [116, HE]);
    const ids = tok.encode('the<|im_end|>');
    assert.equal(tok.decode(ids), '<|endoftext|>the<|im_end|>');
    assert.equal(tok.decode(ids, { skipSpecialTokens: true }), 'the');
    assert.equal(tok.decode([]), '');
    assert.throws(() => tok.decode([264]), RangeError);
  });

  test('special_tokens_map.json overrides tokenizer_config.json; pad falls back to eos', () => {
    const tok = TextTokenizer.fromDir(bosLike());
    assert.deepEqual({ bos: tok.bosId, eos: tok.eosId, pad: tok.padId, stops: tok.eosIds }, { bos: ENDOFTEXT, eos: IM_END, pad: IM_END, stops: [IM_END] });
  });

  test('eos from config.json when the tokenizer names none', () => {
    const tok = TextTokenizer.fromDir(
      writeFolder({ 'tokenizer.json': tokenizerJson(BYTE_LEVEL_POST), 'config.json': { model_type: 'qwen2', eos_token_id: [ENDOFTEXT, IM_END] } }),
    );
    assert.deepEqual(
      { bos: tok.bosId, eos: tok.eosId, pad: tok.padId, stops: tok.eosIds },
      { bos: null, eos: ENDOFTEXT, pad: ENDOFTEXT, stops: [ENDOFTEXT, IM_END] },
    );
  });

  test('renders the chat template like transformers', () => {
    const tok = TextTokenizer.fromDir(qwenLike());
    const messages = [{ role: 'user', content: 'Write a function.' }];
    assert.equal(
      tok.applyChatTemplate(messages, { addGenerationPrompt: true }),
      '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWrite a function.<|im_end|>\n<|im_start|>assistant\n',
    );
    assert.equal(
      tok.applyChatTemplate([{ role: 'system', content: 'Be brief.' }, ...messages]),
      '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWrite a function.<|im_end|>\n',
    );
    const ids = tok.encode(tok.applyChatTemplate(messages, { addGenerationPrompt: true }), { addSpecialTokens: false });
    assert.equal(ids[0], IM_START);
    assert.equal(ids.filter((id) => id === IM_END).length, 2);
  });

  test("promptIds: text with the special tokens, messages rendered with the generation prompt and only the template's BOS", () => {
    const bos = TextTokenizer.fromDir(bosLike());
    assert.deepEqual(bos.promptIds('the'), [ENDOFTEXT, 116, HE]);
    assert.equal(bos.renderPrompt('the'), 'the');
    const messages = [{ role: 'user', content: 'the' }];
    assert.equal(bos.renderPrompt(messages), '<|endoftext|>[user] the<|im_end|>');
    const ids = bos.promptIds(messages);
    assert.deepEqual(ids, bos.encode('<|endoftext|>[user] the<|im_end|>', { addSpecialTokens: false }));
    assert.equal(ids.filter((id) => id === ENDOFTEXT).length, 1);
    const qwen = TextTokenizer.fromDir(qwenLike());
    const rendered = qwen.renderPrompt(messages);
    assert.ok(rendered.endsWith('<|im_start|>user\nthe<|im_end|>\n<|im_start|>assistant\n'), rendered);
    assert.deepEqual(qwen.promptIds(messages), qwen.encode(rendered, { addSpecialTokens: false }));
  });

  test('chatEndId: the special token after an assistant turn; null without a template', () => {
    assert.equal(TextTokenizer.fromDir(qwenLike()).chatEndId, IM_END);
    assert.equal(TextTokenizer.fromDir(bosLike()).chatEndId, IM_END);
    const plain = writeFolder({ 'tokenizer.json': tokenizerJson(BYTE_LEVEL_POST), 'tokenizer_config.json': { eos_token: '<|endoftext|>' } });
    assert.equal(TextTokenizer.fromDir(plain).chatEndId, null);
    const textual = writeFolder({
      'tokenizer.json': tokenizerJson(BYTE_LEVEL_POST),
      'tokenizer_config.json': { eos_token: '<|endoftext|>', chat_template: '{% for m in messages %}{{ m.role }}: {{ m.content }}\n\n{% endfor %}' },
    });
    assert.equal(TextTokenizer.fromDir(textual).chatEndId, null);
  });

  test('chat_template.jinja gets the special-token strings and raise_exception', () => {
    const tok = TextTokenizer.fromDir(bosLike());
    assert.equal(tok.applyChatTemplate([{ role: 'user', content: 'hi' }]), '<|endoftext|>[user] hi<|im_end|>');
    assert.throws(() => tok.applyChatTemplate([{ role: 'tool', content: '{}' }]), /tool messages are not supported/);
  });

  test('saveTo writes the tokenizer files byte for byte', () => {
    const src = bosLike();
    const dest = join(root, 'saved', 'agent_0');
    TextTokenizer.fromDir(src).saveTo(dest);
    assert.deepEqual(readdirSync(dest).sort(), ['chat_template.jinja', 'special_tokens_map.json', 'tokenizer.json', 'tokenizer_config.json']);
    for (const name of readdirSync(dest)) assert.equal(readFileSync(join(dest, name), 'utf8'), readFileSync(join(src, name), 'utf8'));
    assert.deepEqual(TextTokenizer.fromDir(dest).encode('the <|im_end|>'), TextTokenizer.fromDir(src).encode('the <|im_end|>'));
  });
});

describe('tiny-qwen2 fixture (written by scripts/make_fixtures.py)', () => {
  const dir = join(import.meta.dirname, '..', 'fixtures', 'models', 'tiny-qwen2');

  test('round trips code exactly and renders its ChatML template', () => {
    const tok = TextTokenizer.fromDir(dir);
    const text = 'def add(a, b):\n    return a + b  # héllo 🤗\n\n';
    assert.equal(tok.decode(tok.encode(text)), text);
    const imEnd = tok.tokenToId('<|im_end|>');
    assert.equal(tok.eosId, imEnd);
    assert.ok(tok.eosIds.includes(tok.eosId) && tok.eosIds.includes(tok.padId));
    const prompt = tok.applyChatTemplate([{ role: 'user', content: 'hi' }], { addGenerationPrompt: true });
    assert.ok(prompt.includes('<|im_start|>user\nhi<|im_end|>\n') && prompt.endsWith('<|im_start|>assistant\n'), prompt);
    assert.equal(tok.decode(tok.encode(prompt, { addSpecialTokens: false })), prompt);
  });
});

describe('TextTokenizer errors', () => {
  const expectCheckpointError = (fn: () => unknown, code: string, message: string) =>
    assert.throws(fn, (err: unknown) => err instanceof CheckpointError && err.code === code && err.message === message);

  test('missing tokenizer.json', () => {
    const dir = mkdtempSync(join(root, 'empty-'));
    expectCheckpointError(
      () => TextTokenizer.fromDir(dir),
      'TOKENIZER_MISSING',
      `${join(dir, 'tokenizer.json')}: no tokenizer.json in the model folder — save the tokenizer with a fast (Rust-backed) Hugging Face tokenizer, which writes tokenizer.json`,
    );
  });

  test('no chat template', () => {
    const dir = writeFolder({ 'tokenizer.json': tokenizerJson(BYTE_LEVEL_POST), 'tokenizer_config.json': { eos_token: '<|endoftext|>' } });
    const tok = TextTokenizer.fromDir(dir);
    expectCheckpointError(
      () => tok.applyChatTemplate([{ role: 'user', content: 'hi' }]),
      'NO_CHAT_TEMPLATE',
      `${join(dir, 'tokenizer_config.json')}: this tokenizer has no chat_template — use an instruct/chat checkpoint, or format prompts as plain text`,
    );
  });

  test('a chat prompt for a tokenizer without a template names the option and the model', () => {
    const dir = writeFolder({ 'tokenizer.json': tokenizerJson(BYTE_LEVEL_POST), 'tokenizer_config.json': { eos_token: '<|endoftext|>' } });
    const tok = TextTokenizer.fromDir(dir);
    assert.equal(tok.hasChatTemplate, false);
    assert.deepEqual(tok.promptIds('the'), [116, HE]);
    expectCheckpointError(
      () => tok.promptIds([{ role: 'user', content: 'hi' }]),
      'NO_CHAT_TEMPLATE',
      `${join(dir, 'tokenizer_config.json')}: the prompt is a list of chat messages (a formatter returned messages, as env.options.prompt_style chat does), but this model has no chat template — use a model whose tokenizer has a chat_template (an instruct/chat checkpoint), or plain-text prompts`,
    );
  });

  test('no eos anywhere, or an eos that is not in the vocabulary', () => {
    const bare = writeFolder({ 'tokenizer.json': tokenizerJson(BYTE_LEVEL_POST) });
    expectCheckpointError(
      () => TextTokenizer.fromDir(bare),
      'BAD_CONFIG',
      `${join(bare, 'tokenizer_config.json')}: no eos token in tokenizer_config.json, special_tokens_map.json, generation_config.json or config.json — set "eos_token" in tokenizer_config.json`,
    );
    const wrong = writeFolder({ 'tokenizer.json': tokenizerJson(BYTE_LEVEL_POST), 'tokenizer_config.json': { eos_token: '</s>' } });
    expectCheckpointError(
      () => TextTokenizer.fromDir(wrong),
      'BAD_CONFIG',
      `${join(wrong, 'tokenizer_config.json')}: eos_token "</s>" is not in tokenizer.json's vocabulary — set eos_token to a token that exists`,
    );
  });

  test('unparseable tokenizer.json', () => {
    const dir = writeFolder({ 'tokenizer.json': '{"model": ' });
    assert.throws(
      () => TextTokenizer.fromDir(dir),
      (err: unknown) => err instanceof CheckpointError && err.code === 'CORRUPT' && err.file === join(dir, 'tokenizer.json'),
    );
  });
});
