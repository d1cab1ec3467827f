/**
 * How llama.cpp names and lays out a Hugging Face model's tensors (gguf-py tensor_mapping.py and
 * convert_hf_to_gguf.py), shared by the GGUF exporter (gguf.ts) and importer (gguf-import.ts) so
 * the two cannot drift: the name-table shape (each architecture's table is in its entry,
 * model/architectures/), the Q/K row permutation of `llama`, and the pre-tokenizers by name.
 */
/**
 * HF's rotate-half layout → llama.cpp's interleaved pairs for one projection's rows
 * (convert_hf_to_gguf.py `permute`: reshape(heads, 2, D/2, cols).swapaxes(1, 2)); with `inverse`,
 * back again. Row j·D/2 + i of a head (HF) is row 2i + j (llama.cpp).
 */
export function permuteForRope(data: Float32Array, heads: number, cols: number, inverse = false): Float32Array {
  const rows = data.length / cols;
  const D = rows / heads;
  if (!Number.isInteger(D) || D % 2 !== 0) throw new Error(`cannot permute ${rows} rows into ${heads} heads of even size`);
  const out = new Float32Array(data.length);
  for (let h = 0; h < heads; h++)
    for (let i = 0; i < D / 2; i++)
      for (let j = 0; j < 2; j++) {
        const hf = (h * D + j * (D / 2) + i) * cols;
        const cpp = (h * D + i * 2 + j) * cols;
        const [src, dst] = inverse ? [cpp, hf] : [hf, cpp];
        out.set(data.subarray(src, src + cols), dst);
      }
  return out;
}

/** The inverse of permuteForRope: llama.cpp's interleaved pairs back to HF's rotate-half rows. */
export const unpermuteForRope = (data: Float32Array, heads: number, cols: number): Float32Array => permuteForRope(data, heads, cols, true);

/** llama.cpp's tensor names of one model family (gguf-py tensor_mapping.py). */
export interface TensorNames {
  /** Whole-model tensors, by full HF name. */
  fixed: Record<string, string>;
  /** A block tensor's HF name: block index, part, then weight or bias. */
  block: RegExp;
  /** Block parts → llama.cpp's `blk.N.<name>`. */
  parts: Record<string, string>;
}

/** llama.cpp's name of a HF tensor under a family's table, or null for one it has no use for. */
export function ggufTensorName(hf: string, names: TensorNames): string | null {
  if (Object.hasOwn(names.fixed, hf)) return names.fixed[hf];
  const m = names.block.exec(hf);
  if (!m || !Object.hasOwn(names.parts, m[2])) return null;
  return `blk.${m[1]}.${names.parts[m[2]]}.${m[3]}`;
}

/** A GGUF metadata value as the writer takes it. */
export type GgufValue =
  | { type: 'u32' | 'i32' | 'f32' | 'u64'; value: number }
  | { type: 'bool'; value: boolean }
  | { type: 'string'; value: string }
  | { type: 'array'; of: 'string'; value: string[] }
  | { type: 'array'; of: 'i32' | 'u32' | 'f32'; value: number[] };

/**
 * Pre-tokenizer regexes per `tokenizer.ggml.pre`, as llama.cpp's llm_tokenizer_bpe applies them
 * (each splits the pieces of the one before, keeping matches and gaps: HF's Split "Isolated"),
 * and whether BOS is added when the file does not say. llama.cpp's adapted forms are used, with
 * `(?i:'s|…)` spelled out, since JavaScript regexes have no inline case-insensitive groups.
 */
const GPT2_REGEX = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
const CONTRACTIONS = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])";
export const PRE_TOKENIZERS: Record<string, { regexes: string[]; addBos: boolean; ignoreMerges: boolean }> = {
  default: {
    regexes: ['[\\p{P}\\$\\+<=>\\^~\\|]+', GPT2_REGEX, '\\p{N}+', '[0-9][0-9][0-9]'],
    addBos: false,
    ignoreMerges: false,
  },
  'gpt-2': { regexes: [GPT2_REGEX], addBos: false, ignoreMerges: false },
  smollm: { regexes: ['\\p{N}', GPT2_REGEX], addBos: false, ignoreMerges: false },
  'llama-bpe': {
    regexes: [`${CONTRACTIONS}|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+`],
    addBos: true,
    ignoreMerges: true,
  },
  qwen2: {
    regexes: [`${CONTRACTIONS}|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+`],
    addBos: false,
    ignoreMerges: false,
  },
};
PRE_TOKENIZERS.llama3 = PRE_TOKENIZERS['llama-v3'] = PRE_TOKENIZERS['llama-bpe'];

/**
 * The `tokenizer.ggml.pre` name of a byte-level BPE tokenizer.json's pre_tokenizer, or null when
 * llama.cpp has none for it: HF's GPT-2 ByteLevel (regex on) is `gpt-2`, SmolLM's individual
 * digits + ByteLevel is `smollm`, and a Sequence of Split regexes + ByteLevel (regex off), as
 * gguf-import.ts writes them, is the entry with those regexes.
 */
export function ggufPreTokenizer(pre: unknown): string | null {
  const p = pre as { type?: string; use_regex?: boolean; pretokenizers?: unknown[] } | null | undefined;
  if (p?.type === 'ByteLevel') return p.use_regex === false ? null : 'gpt-2';
  if (p?.type !== 'Sequence' || !Array.isArray(p.pretokenizers)) return null;
  const parts = p.pretokenizers as { type?: string; use_regex?: boolean; individual_digits?: boolean; behavior?: string; pattern?: { Regex?: string } }[];
  const last = parts.at(-1);
  if (last?.type !== 'ByteLevel') return null;
  const head = parts.slice(0, -1);
  if (last.use_regex !== false) return head.length === 1 && head[0].type === 'Digits' && head[0].individual_digits === true ? 'smollm' : null;
  if (!head.every((x) => x.type === 'Split' && x.behavior === 'Isolated' && typeof x.pattern?.Regex === 'string')) return null;
  const regexes = head.map((x) => x.pattern?.Regex);
  const found = Object.entries(PRE_TOKENIZERS).find(([, v]) => v.regexes.length === regexes.length && v.regexes.every((r, i) => r === regexes[i]));
  return found?.[0] ?? null;
}
