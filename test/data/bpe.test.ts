/**
 * The BPE trainer: its output loads unchanged in @huggingface/tokenizers, round-trips arbitrary text,
 * compresses, maps special tokens to their ids, and is deterministic. Also checks the committed
 * project tokenizer in data/tokenizer.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Template } from '@huggingface/jinja';
import { Tokenizer } from '@huggingface/tokenizers';
import { bytesToUnicode, countPieces, DEFAULT_SPECIAL_TOKENS, trainBpe, writeTokenizer } from '../../src/data/bpe.js';
import { DataError } from '../../src/data/errors.js';

const PROSE = [
  'Call me Ishmael. Some years ago, never mind how long precisely, having little or no money in my purse,',
  'and nothing particular to interest me on shore, I thought I would sail about a little and see the watery part of the world.',
  'It is a way I have of driving off the spleen and regulating the circulation. Whenever I find myself growing grim',
  'about the mouth; whenever it is a damp, drizzly November in my soul, then, I account it high time to get to sea.',
].join('\n');
const CODE = [
  'def add(a, b):',
  '    """Return a plus b."""',
  '    return a + b',
  '',
  '',
  'assert add(2, 3) == 5',
  'const twice = (xs) => xs.map((x) => x * 2);',
].join('\n');
const TRAIN = Array.from({ length: 30 }, (_, i) => `${PROSE}\n\n${CODE.replaceAll('add', `add${i % 7}`)}\n`);

const TRICKY = [
  'hello world',
  '  leading and trailing spaces  ',
  'tabs\tand\nnew\nlines\r\nCRLF\n\n\n',
  'def f(x):\n    if x:\n        return [x, {"k": 1}]\n\treturn None\n',
  'héllo wörld — “quotes” ‘single’ … naïve café',
  'emoji 🤖🐋 and 👩‍👩‍👧 family, flags 🇺🇸',
  '中文字符 日本語 한국어 العربية עברית',
  'combining: e\u0301 a\u0308; zero-width:\u200b|; nbsp:\u00a0|',
  "it's we're they'll I'd she's 1234567890 3.14159 -42",
  'special tokens inline: <|user|>\nhi\n<|assistant|>\nhello<|eos|>',
  '\u0000\u0001 control bytes \u007f',
  '    ',
];

function load(trained: { tokenizerJson: object; tokenizerConfig: object }): Tokenizer {
  return new Tokenizer(trained.tokenizerJson, trained.tokenizerConfig);
}

describe('bytesToUnicode', () => {
  it('is a bijection of the 256 bytes onto printable characters, as in GPT-2', () => {
    const map = bytesToUnicode();
    assert.equal(new Set(map).size, 256);
    assert.equal(map[0x20], 'Ġ');
    assert.equal(map[0x0a], 'Ċ');
    assert.equal(map[0x41], 'A');
    for (const ch of map) assert.doesNotMatch(ch, /\s/u);
  });
});

describe('trainBpe', () => {
  const trained = trainBpe(TRAIN, { vocabSize: 400, minFrequency: 2 });
  const tok = load(trained);

  it('fills the vocabulary: specials, then 256 bytes, then merges', () => {
    const vocab = trained.tokenizerJson.model.vocab;
    assert.equal(Object.keys(vocab).length, 400);
    assert.deepEqual(new Set(Object.values(vocab)).size, 400);
    for (const [i, s] of DEFAULT_SPECIAL_TOKENS.entries()) assert.equal(vocab[s], i);
    assert.equal(vocab[bytesToUnicode()[0]], DEFAULT_SPECIAL_TOKENS.length);
    assert.equal(trained.tokenizerJson.model.merges.length, 400 - 256 - DEFAULT_SPECIAL_TOKENS.length);
  });

  it('loads in @huggingface/tokenizers and round-trips tricky text exactly', () => {
    for (const text of TRICKY) assert.equal(tok.decode(tok.encode(text).ids), text, JSON.stringify(text));
  });

  it('compresses: the training text needs far fewer tokens than bytes', () => {
    const bytes = new TextEncoder().encode(TRAIN[0]).length;
    const tokens = tok.encode(TRAIN[0]).ids.length;
    assert.ok(tokens < bytes / 2, `${tokens} tokens for ${bytes} bytes`);
  });

  it('maps special tokens to their ids and adds no BOS/EOS', () => {
    assert.deepEqual(tok.encode('<|user|>').ids, [3]);
    assert.deepEqual(tok.encode('<|bos|><|eos|><|pad|><|user|><|assistant|><|system|>').ids, [0, 1, 2, 3, 4, 5]);
    const ids = tok.encode('hello').ids;
    assert.ok(!ids.includes(0) && !ids.includes(1));
  });

  it('learns the most frequent pair first', () => {
    const t = trainBpe(['xy xy xy xy ab ab'], { vocabSize: DEFAULT_SPECIAL_TOKENS.length + 257, minFrequency: 1 });
    assert.deepEqual(t.tokenizerJson.model.merges, ['x y']); // x·y occurs 4 times, Ġ·x 3 times
  });

  it('stops at minFrequency', () => {
    const t = trainBpe(['abc abc'], { vocabSize: 1000, minFrequency: 3 });
    assert.equal(t.tokenizerJson.model.merges.length, 0);
  });

  it('is deterministic', () => {
    assert.deepEqual(trainBpe(TRAIN, { vocabSize: 400 }), trained);
  });

  it('rejects a vocabulary too small for the bytes', () => {
    assert.throws(
      () => trainBpe(TRAIN, { vocabSize: 100 }),
      (e: unknown) => e instanceof DataError && e.code === 'BAD_OPTIONS',
    );
  });

  it('writes files that load, with a chat template that renders role prompts', () => {
    const dir = mkdtempSync(join(tmpdir(), 'bpe-'));
    try {
      const { tokenizerPath, configPath } = writeTokenizer(dir, trained);
      const config = JSON.parse(readFileSync(configPath, 'utf8'));
      const reloaded = new Tokenizer(JSON.parse(readFileSync(tokenizerPath, 'utf8')), config);
      assert.deepEqual(reloaded.encode(TRICKY[3]).ids, tok.encode(TRICKY[3]).ids);
      const prompt = new Template(config.chat_template).render({
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: 'Hi' },
        ],
        add_generation_prompt: true,
      });
      assert.equal(prompt, '<|system|>\nBe brief.\n<|user|>\nHi\n<|assistant|>\n');
      assert.deepEqual(reloaded.encode(prompt).ids.slice(0, 1), [5]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('countPieces', () => {
  it('splits with the GPT-2 pattern', () => {
    assert.deepEqual(
      [...countPieces(["it's  a test", ' a'])],
      [
        ['it', 1],
        ["'s", 1],
        [' ', 1],
        [' a', 2],
        [' test', 1],
      ],
    );
  });
});

describe('the committed project tokenizer (data/tokenizer)', () => {
  const dir = join(import.meta.dirname, '../../data/tokenizer');
  const json = JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8'));
  const config = JSON.parse(readFileSync(join(dir, 'tokenizer_config.json'), 'utf8'));
  const tok = new Tokenizer(json, config);

  it('has 4096 tokens and the role tokens', () => {
    assert.equal(Object.keys(json.model.vocab).length, 4096);
    assert.equal(tok.token_to_id('<|assistant|>'), 4);
    assert.equal(config.eos_token, '<|eos|>');
  });

  it('round-trips tricky text', () => {
    for (const text of TRICKY) assert.equal(tok.decode(tok.encode(text).ids), text, JSON.stringify(text));
  });
});
