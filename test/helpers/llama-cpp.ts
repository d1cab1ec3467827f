/**
 * llama.cpp run on a GGUF file through llama-cpp-python's low-level API (the C API over ctypes),
 * token ids in, logits out: what the GGUF tests compare with magrpo's forward pass.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';

/**
 * Loads the model of argv[1] quietly and defines context(n_ctx, n_batch, threads, f32_kv). No
 * repacked weight buffers: on CPUs with AMX, llama-cpp-python 0.3.36's AMX kernels for quantized
 * weights die with SIGILL (an AMX tile used unconfigured); the plain CPU kernels do the same maths.
 * An F32 KV cache turns flash attention off: with it on, an F32 cache alone changed no logit.
 */
const PREAMBLE = `
import ctypes, json, sys
import llama_cpp as L
import numpy as np
keep = L.llama_log_callback(lambda level, text, user: None)
L.llama_log_set(keep, ctypes.c_void_p(0))
L.llama_backend_init()
mp = L.llama_model_default_params()
mp.use_extra_bufts = False
model = L.llama_model_load_from_file(sys.argv[1].encode(), mp)
assert model, "load failed"
def context(n_ctx, n_batch, threads, f32_kv):
    p = L.llama_context_default_params()
    p.n_ctx, p.n_batch, p.n_ubatch, p.n_threads, p.n_threads_batch = n_ctx, n_batch, n_batch, threads, threads
    if f32_kv:
        p.type_k = p.type_v = 0  # GGML_TYPE_F32
        p.flash_attn_type = 0
    return L.llama_init_from_model(model, p)`;

const SCRIPT = `${PREAMBLE}
ids, new, f32_kv = json.loads(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
ctx = context(len(ids) + new, len(ids), 1, f32_kv)
V = L.llama_vocab_n_tokens(L.llama_model_get_vocab(model))
def decode(tokens, start):
    b = L.llama_batch_init(len(tokens), 0, 1)
    for i, t in enumerate(tokens):
        b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = t, start + i, 1, True
        b.seq_id[i][0] = 0
    b.n_tokens = len(tokens)
    assert L.llama_decode(ctx, b) == 0
    rows = [np.ctypeslib.as_array(L.llama_get_logits_ith(ctx, i), shape=(V,)).tolist() for i in range(len(tokens))]
    L.llama_batch_free(b)
    return rows
logits = rows = decode(ids, 0)
greedy = []
for step in range(new):
    greedy.append(int(np.argmax(rows[-1])))
    if step < new - 1:
        rows = decode([greedy[-1]], len(ids) + step)
print(json.dumps({"logits": logits, "greedy": greedy}))`;

/**
 * llama.cpp's logits at every position of `ids` (one sequence, one llama_decode, 1 thread), and
 * its `greedy` continuation of `newTokens` argmax tokens, decoded one at a time on its KV cache.
 * llama.cpp's defaults (F16 KV cache, flash attention "auto"), or with `f32Kv` an F32 KV cache
 * and no flash attention, which leaves F32 weights exact up to float rounding but for llama.cpp's
 * GELU (looked up in an F16 table).
 */
export function llamaLogits(
  python: string,
  file: string,
  ids: number[],
  opts: { newTokens?: number; f32Kv?: boolean } = {},
): { logits: number[][]; greedy: number[] } {
  const args = ['-c', SCRIPT, file, JSON.stringify(ids), String(opts.newTokens ?? 0), opts.f32Kv ? '1' : '0'];
  const r = spawnSync(python, args, { encoding: 'utf8', timeout: 300_000, maxBuffer: 1 << 30 });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout.trim().split('\n').at(-1) ?? '{}');
}

const TOKENIZE = `
import json, sys
import llama_cpp as L
m = L.Llama(model_path=sys.argv[1], vocab_only=True, verbose=False)
print(json.dumps([m.tokenize(t.encode(), add_bos=False, special=True) for t in json.loads(sys.argv[2])]))`;

/** llama.cpp's token ids for each text (special tokens parsed, no BOS added). */
export function llamaTokenize(python: string, file: string, texts: string[]): number[][] {
  const r = spawnSync(python, ['-c', TOKENIZE, file, JSON.stringify(texts)], { encoding: 'utf8', timeout: 120_000 });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout.trim().split('\n').at(-1) ?? '[]');
}

const LOGPROBS = `${PREAMBLE}
ids, start, f32_kv = json.loads(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
ctx = context(len(ids), len(ids), 2, f32_kv)
V = L.llama_vocab_n_tokens(L.llama_model_get_vocab(model))
b = L.llama_batch_init(len(ids), 0, 1)
for i, t in enumerate(ids):
    b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = t, i, 1, i >= start - 1
    b.seq_id[i][0] = 0
b.n_tokens = len(ids)
assert L.llama_decode(ctx, b) == 0
out = []
for i in range(start - 1, len(ids) - 1):
    row = np.ctypeslib.as_array(L.llama_get_logits_ith(ctx, i), shape=(V,)).astype(np.float64)
    lse = row.max() + np.log(np.exp(row - row.max()).sum())
    top = np.argsort(-row)[:3]
    out.append({"lp": float(row[ids[i + 1]] - lse), "top": [[int(t), float(row[t] - lse)] for t in top]})
print(json.dumps(out))`;

/**
 * llama.cpp's log-probabilities of each token of `ids` from position `start` on, given the ones
 * before it (one batch), with its 3 most likely tokens at each of those positions.
 */
export function llamaLogprobs(
  python: string,
  file: string,
  ids: number[],
  start: number,
  opts: { f32Kv?: boolean } = {},
): { lp: number; top: [number, number][] }[] {
  const r = spawnSync(python, ['-c', LOGPROBS, file, JSON.stringify(ids), String(start), opts.f32Kv ? '1' : '0'], {
    encoding: 'utf8',
    timeout: 300_000,
    maxBuffer: 1 << 26,
  });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout.trim().split('\n').at(-1) ?? '[]');
}
