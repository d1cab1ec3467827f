/**
 * GGUF → a Hugging Face model (config.json, weights, tokenizer files, generation_config.json),
 * the inverse of gguf.ts's exporter and of llama.cpp's convert_hf_to_gguf.py:
 * - hyperparameters from `<arch>.*` metadata into the config.json transformers would have written;
 * - tensors dequantized to fp32 (gguf-quants.ts) and renamed to HF names through the exporter's own
 *   name table, so export and import cannot drift apart; `llama` Q/K rows are permuted back
 *   (llama.cpp's rope pairs 2i with 2i + 1, HF's i with i + D/2), `gpt2`'s Conv1D matrices
 *   transposed back to [in, out];
 * - a tokenizer.json from `tokenizer.ggml.*` (a GPT-2-style byte-level BPE), with the pre-tokenizer
 *   regexes llama.cpp uses for the file's `tokenizer.ggml.pre`, special tokens from the token
 *   types, BOS per `tokenizer.ggml.add_bos_token`, and the chat template.
 *
 * Supported: architectures `llama`, `qwen2`, `gpt2`; tokenizers `gpt2` (BPE). SentencePiece
 * (`tokenizer.ggml.model = llama`) and other architectures are refused with the list of what works.
 */
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { bpeModelJson } from '../data/bpe.js';
import type { Architecture, GgufArchitecture } from './architecture.js';
import { architectureForGguf, architectureOf, GGUF_ARCHITECTURES } from './architectures/index.js';
import { writeFileAtomic } from './atomic-write.js';
import { type GenerationDefaults, type ModelConfig, parseGenerationConfig } from './config.js';
import { CheckpointError } from './errors.js';
import { type GgufFile, GgufTensorReader, hasGgufMagic, metaArray, metaBool, metaNumber, metaString, readGgufHeader, required } from './gguf-file.js';
import { ggufTensorName, PRE_TOKENIZERS } from './gguf-names.js';
import { ggmlTypeName } from './gguf-quants.js';
import { parseModelConfig } from './hf-config.js';
import { type SaveDtype, saveModel } from './load.js';
import type { TokenizerFile } from './tokenizer.js';
import type { CausalLM } from './transformer.js';

/** llama.cpp's token types (llama_token_type). */
const TOKEN_CONTROL = 3;
const TOKEN_USER_DEFINED = 4;

/** What a GGUF file holds, in Hugging Face terms. */
export interface GgufModel {
  gguf: GgufFile;
  /** config.json as transformers would write it. */
  hfConfig: Record<string, unknown>;
  config: ModelConfig;
  /** tokenizer.json and tokenizer_config.json texts. */
  tokenizerFiles: Map<TokenizerFile, string>;
  /** generation_config.json. */
  generation: GenerationDefaults;
  generationJson: Record<string, unknown>;
}

/** True when `path` is a file that starts with the GGUF magic (a folder is not). */
export function isGgufFile(path: string): boolean {
  const st = statSync(path, { throwIfNoEntry: false });
  if (!st?.isFile()) return false;
  if (path.endsWith('.gguf')) return true;
  return hasGgufMagic(path);
}

/** Reads a GGUF file's header and turns its metadata into HF config, tokenizer and generation files. */
export function readGgufModel(file: string): GgufModel {
  const gguf = readGgufHeader(file);
  const arch = required(gguf, 'general.architecture', metaString(gguf, 'general.architecture'));
  const entry = architectureForGguf(arch);
  if (entry === undefined)
    throw new CheckpointError(
      'UNKNOWN_ARCHITECTURE',
      file,
      `GGUF architecture "${arch}" is not supported; supported: ${GGUF_ARCHITECTURES.join(', ')}`,
      'use a model of a supported architecture (Llama, SmolLM, Qwen2, GPT-2 families)',
    );
  const hfConfig = hfConfigOf(gguf, entry, arch as GgufArchitecture);
  const config = parseModelConfig(hfConfig, `${file} (metadata)`);
  const { files, generationJson } = tokenizerFilesOf(gguf, config);
  const generation = parseGenerationConfig(generationJson, `${file} (tokenizer metadata)`);
  return { gguf, hfConfig, config, tokenizerFiles: files, generation, generationJson };
}

/**
 * The model's weights, dequantized, in a new model. Every parameter must be in the file, and
 * every tensor of the file must be a parameter (or one we know to drop: GPT-2's copy of the tied
 * head); anything else is an error naming the tensor, since ignoring it could change the logits.
 */
export function loadGgufWeights(m: GgufModel): CausalLM {
  const { gguf, config } = m;
  const arch = metaString(gguf, 'general.architecture') as GgufArchitecture;
  const entry = architectureOf(config);
  const byName = new Map(gguf.tensors.map((t) => [t.name, t]));
  const used = new Set<string>();
  const model = entry.create(config);
  const reader = new GgufTensorReader(gguf);
  try {
    for (const spec of entry.paramSpecs(config)) {
      const name = ggufTensorName(spec.name, entry.gguf.tensorNames);
      const info = name === null ? undefined : byName.get(name);
      if (name === null || info === undefined)
        throw new CheckpointError(
          'MISSING_TENSOR',
          gguf.file,
          `tensor "${name ?? spec.name}" (${spec.name}) is missing for a ${arch} model with these hyperparameters`,
          'the file is incomplete or its metadata does not match its tensors',
        );
      used.add(name);
      const mismatch = () =>
        new CheckpointError(
          'SHAPE_MISMATCH',
          gguf.file,
          `tensor "${name}" has shape [${info.shape}] but the metadata implies [${spec.shape}] for ${spec.name}`,
          'the file is damaged or its metadata does not match its tensors',
        );
      if (info.numel !== spec.shape.reduce((a, b) => a * b, 1)) throw mismatch();
      const raw = reader.read(info);
      const bad = raw.findIndex((x) => !Number.isFinite(x));
      if (bad >= 0)
        throw new CheckpointError('CORRUPT', gguf.file, `tensor "${name}" holds ${raw[bad]} at element ${bad}: weights must be finite`, 'the file is damaged');
      const { shape, data } = entry.gguf.fromGguf(arch, config, name, info.shape, raw);
      if (shape.join() !== spec.shape.join()) throw mismatch();
      const p = model.params.get(spec.name);
      if (p === undefined) throw new Error(`internal: ${spec.name} is not a parameter`);
      p.data.set(data);
    }
  } finally {
    reader.close();
  }
  for (const t of gguf.tensors) {
    if (used.has(t.name)) continue;
    if (entry.gguf.droppable.includes(t.name)) continue; // e.g. GPT-2's copy of the tied head
    if (t.name === 'rope_freqs.weight')
      throw new CheckpointError(
        'UNSUPPORTED_FEATURE',
        gguf.file,
        'tensor "rope_freqs.weight": scaled RoPE (Llama 3.1 style) is not implemented',
        'use a model with plain RoPE',
      );
    throw new CheckpointError(
      'UNSUPPORTED_FEATURE',
      gguf.file,
      `tensor "${t.name}" (${ggmlTypeName(t.type)} [${t.shape}]) has no place in a ${arch} model as implemented here`,
      'use a plain Llama, Qwen2 or GPT-2 model',
    );
  }
  return model;
}

/** config.json from the metadata: ids and vocabulary here, the rest from the architecture's entry. */
function hfConfigOf(g: GgufFile, entry: Architecture, arch: GgufArchitecture): Record<string, unknown> {
  const embd = g.tensors.find((t) => t.name === 'token_embd.weight');
  if (embd === undefined) throw new CheckpointError('MISSING_TENSOR', g.file, 'tensor "token_embd.weight" is missing', 'the file is incomplete');
  const tokenId = (key: string) => metaNumber(g, `tokenizer.ggml.${key}`) ?? null;
  return {
    vocab_size: embd.shape[0],
    bos_token_id: tokenId('bos_token_id'),
    eos_token_id: tokenId('eos_token_id'),
    pad_token_id: tokenId('padding_token_id'),
    torch_dtype: 'float32',
    ...entry.gguf.hfConfig(g, arch),
  };
}

/** tokenizer.json, tokenizer_config.json and generation_config.json from `tokenizer.ggml.*`. */
function tokenizerFilesOf(g: GgufFile, config: ModelConfig): { files: Map<TokenizerFile, string>; generationJson: Record<string, unknown> } {
  const kind = metaString(g, 'tokenizer.ggml.model');
  if (kind === undefined || kind === 'none')
    throw new CheckpointError(
      'TOKENIZER_MISSING',
      g.file,
      'the file has no tokenizer (tokenizer.ggml.model is absent or "none")',
      'use a GGUF file that carries its tokenizer',
    );
  if (kind !== 'gpt2')
    throw new CheckpointError(
      'UNSUPPORTED_FEATURE',
      g.file,
      `tokenizer.ggml.model is "${kind}"; only "gpt2" (byte-level BPE) tokenizers are read${kind === 'llama' ? ' (this is a SentencePiece tokenizer)' : ''}`,
      'use a model with a GPT-2-style BPE tokenizer (Llama 3, SmolLM, Qwen2, GPT-2), or its Hugging Face folder',
    );
  const preName = metaString(g, 'tokenizer.ggml.pre') ?? 'default';
  const pre = PRE_TOKENIZERS[preName];
  if (pre === undefined)
    throw new CheckpointError(
      'UNSUPPORTED_FEATURE',
      g.file,
      `tokenizer.ggml.pre is "${preName}"; known pre-tokenizers: ${Object.keys(PRE_TOKENIZERS).join(', ')}`,
      'use a model with a supported pre-tokenizer, or its Hugging Face folder',
    );
  const tokens = required(g, 'tokenizer.ggml.tokens', metaArray<string>(g, 'tokenizer.ggml.tokens', 'string'));
  const types = metaArray<number>(g, 'tokenizer.ggml.token_type', 'number') ?? [];
  if (types.length !== 0 && types.length !== tokens.length)
    throw new CheckpointError('CORRUPT', g.file, `tokenizer.ggml.token_type has ${types.length} entries for ${tokens.length} tokens`, 'the file is damaged');
  const merges = required(g, 'tokenizer.ggml.merges', metaArray<string>(g, 'tokenizer.ggml.merges', 'string'));
  if (tokens.length > config.vocabSize)
    throw new CheckpointError('SHAPE_MISMATCH', g.file, `${tokens.length} tokens but token_embd.weight has ${config.vocabSize} rows`, 'the file is damaged');
  const vocab: Record<string, number> = {};
  const added: Record<string, unknown>[] = [];
  for (const [id, token] of tokens.entries()) {
    if (!Object.hasOwn(vocab, token)) vocab[token] = id;
    if (types[id] === TOKEN_CONTROL || types[id] === TOKEN_USER_DEFINED)
      added.push({ id, content: token, single_word: false, lstrip: false, rstrip: false, normalized: false, special: types[id] === TOKEN_CONTROL });
  }
  const tokenAt = (key: string): string | null => {
    const id = metaNumber(g, `tokenizer.ggml.${key}`);
    if (id === undefined) return null;
    if (!Number.isInteger(id) || id < 0 || id >= tokens.length)
      throw new CheckpointError('CORRUPT', g.file, `tokenizer.ggml.${key} is ${id}, outside the ${tokens.length} tokens`, 'the file is damaged');
    return tokens[id];
  };
  const bos = tokenAt('bos_token_id');
  const eos = tokenAt('eos_token_id');
  const addBos = (metaBool(g, 'tokenizer.ggml.add_bos_token') ?? pre.addBos) && bos !== null;
  const addEos = (metaBool(g, 'tokenizer.ggml.add_eos_token') ?? false) && eos !== null;
  const single: unknown[] = [];
  const special: Record<string, unknown> = {};
  if (addBos) {
    single.push({ SpecialToken: { id: bos, type_id: 0 } });
    special[bos as string] = { id: bos, ids: [vocab[bos as string]], tokens: [bos] };
  }
  single.push({ Sequence: { id: 'A', type_id: 0 } });
  if (addEos) {
    single.push({ SpecialToken: { id: eos, type_id: 0 } });
    special[eos as string] = { id: eos, ids: [vocab[eos as string]], tokens: [eos] };
  }
  const tokenizerJson = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: null,
    pre_tokenizer: {
      type: 'Sequence',
      pretokenizers: [
        ...pre.regexes.map((r) => ({ type: 'Split', pattern: { Regex: r }, behavior: 'Isolated', invert: false })),
        { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false },
      ],
    },
    post_processor:
      addBos || addEos
        ? {
            type: 'TemplateProcessing',
            single,
            pair: [...single, { Sequence: { id: 'B', type_id: 1 } }, ...(addEos ? [{ SpecialToken: { id: eos, type_id: 1 } }] : [])],
            special_tokens: special,
          }
        : null,
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: bpeModelJson(vocab, merges, pre.ignoreMerges),
  };
  const chatTemplate = metaString(g, 'tokenizer.chat_template');
  const tokenizerConfig: Record<string, unknown> = {
    tokenizer_class: 'PreTrainedTokenizerFast',
    bos_token: bos,
    eos_token: eos,
    pad_token: tokenAt('padding_token_id'),
    unk_token: tokenAt('unknown_token_id'),
    add_bos_token: addBos,
    add_eos_token: addEos,
    clean_up_tokenization_spaces: false,
    model_max_length: config.maxPositions,
    additional_special_tokens: added.filter((t) => t.special).map((t) => t.content),
  };
  if (chatTemplate !== undefined) tokenizerConfig.chat_template = chatTemplate;
  for (const k of Object.keys(tokenizerConfig)) if (tokenizerConfig[k] === null) delete tokenizerConfig[k];
  // llama.cpp ends generation at EOS and at the end-of-turn / end-of-message tokens.
  const stopIds = ['eos_token_id', 'eot_token_id', 'eom_token_id'].map((k) => metaNumber(g, `tokenizer.ggml.${k}`)).filter((x) => x !== undefined);
  const generationJson: Record<string, unknown> = { eos_token_id: [...new Set(stopIds)] };
  const bosId = metaNumber(g, 'tokenizer.ggml.bos_token_id');
  const padId = metaNumber(g, 'tokenizer.ggml.padding_token_id');
  if (bosId !== undefined) generationJson.bos_token_id = bosId;
  if (padId !== undefined) generationJson.pad_token_id = padId;
  if (stopIds.length === 1) generationJson.eos_token_id = stopIds[0];
  if (stopIds.length === 0) delete generationJson.eos_token_id;
  const files = new Map<TokenizerFile, string>([
    ['tokenizer.json', JSON.stringify(tokenizerJson)],
    ['tokenizer_config.json', `${JSON.stringify(tokenizerConfig, null, 2)}\n`],
  ]);
  return { files, generationJson };
}

/** ggml file types (general.file_type, llama_ftype), for the model card. */
const FILE_TYPES: Record<number, string> = {
  0: 'F32',
  1: 'F16',
  2: 'Q4_0',
  3: 'Q4_1',
  7: 'Q8_0',
  8: 'Q5_0',
  9: 'Q5_1',
  10: 'Q2_K',
  11: 'Q3_K_S',
  12: 'Q3_K_M',
  13: 'Q3_K_L',
  14: 'Q4_K_S',
  15: 'Q4_K_M',
  16: 'Q5_K_S',
  17: 'Q5_K_M',
  18: 'Q6_K',
  32: 'BF16',
};

/** A short README.md for a converted folder: what the model is, where it came from, its licence. */
export function modelCardOf(m: GgufModel, dtype: SaveDtype): string {
  const g = m.gguf;
  const s = (k: string) => metaString(g, k);
  const fileType = metaNumber(g, 'general.file_type');
  const counts = new Map<string, number>();
  for (const t of g.tensors) counts.set(ggmlTypeName(t.type), (counts.get(ggmlTypeName(t.type)) ?? 0) + 1);
  const params = g.tensors.reduce((a, t) => a + t.numel, 0);
  const lines = [
    '---',
    `license: ${s('general.license') ?? 'unknown'}`,
    `base_model_source: ${basename(g.file)}`,
    '---',
    '',
    `# ${s('general.name') ?? basename(g.file, '.gguf')}`,
    '',
    `Converted by \`magrpo convert\` from the GGUF file \`${basename(g.file)}\` (${(g.fileSize / 1e6).toFixed(1)} MB, GGUF v${g.version}).`,
    '',
    `- architecture: ${s('general.architecture')} (${m.hfConfig.architectures}), ${(params / 1e6).toFixed(1)} M parameters`,
    `- organization: ${s('general.organization') ?? 'not stated'}; base name: ${s('general.basename') ?? 'not stated'}; fine-tune: ${s('general.finetune') ?? 'not stated'}`,
    `- licence: ${s('general.license') ?? 'not stated in the file: check where it came from'}`,
    `- source quantization: ${fileType === undefined ? 'not stated' : (FILE_TYPES[fileType] ?? `file type ${fileType}`)}; tensors: ${[...counts].map(([t, n]) => `${n} ${t}`).join(', ')}`,
    `- stored here as ${dtype}: dequantized, so the weights carry the source's quantization error (a 4-bit file is not the original model's weights; it was rounded to 4-5 bits per weight in blocks of 32, which costs a little quality).`,
    '',
    'Load it with `LanguageModel.load(dir)` in magrpo, or `AutoModelForCausalLM.from_pretrained(dir)` in transformers.',
    '',
  ];
  return lines.join('\n');
}

/**
 * Writes the HF folder of a GGUF file: model.safetensors, config.json, tokenizer files,
 * generation_config.json and README.md. Atomic as a whole: everything goes into a sibling
 * temporary folder that is renamed into place, so a failure leaves no half-written `out`.
 * `out` must not exist or be an empty folder.
 */
export function convertGguf(file: string, out: string, opts: { dtype?: SaveDtype } = {}): { config: ModelConfig; tensors: number } {
  const dtype = opts.dtype ?? 'F32';
  const target = resolve(out);
  if (existsSync(target) && (!statSync(target).isDirectory() || readdirSync(target).length > 0))
    throw new CheckpointError('BAD_CONFIG', target, 'exists and is not an empty folder', 'give a new folder to write the converted model to');
  const m = readGgufModel(file);
  const model = loadGgufWeights(m);
  mkdirSync(dirname(target), { recursive: true });
  const tmp = join(dirname(target), `.${basename(target)}.converting-${process.pid}`);
  rmSync(tmp, { recursive: true, force: true });
  try {
    saveModel(model, tmp, dtype);
    for (const [name, text] of m.tokenizerFiles) writeFileAtomic(join(tmp, name), [text]);
    writeFileAtomic(join(tmp, 'generation_config.json'), [`${JSON.stringify(m.generationJson, null, 2)}\n`]);
    writeFileAtomic(join(tmp, 'README.md'), [modelCardOf(m, dtype)]);
    if (existsSync(target)) rmSync(target, { recursive: true }); // an empty folder
    renameSync(tmp, target);
  } catch (e) {
    rmSync(tmp, { recursive: true, force: true });
    throw e;
  }
  return { config: m.config, tensors: m.gguf.tensors.length };
}
