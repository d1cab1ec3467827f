/**
 * llama.cpp run on a GGUF file through llama-cpp-python's low-level API (the C API over ctypes),
 * token ids in, logits out: what the GGUF tests compare with magrpo's forward pass.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';

const SCRIPT = `
import ctypes, json, sys
import llama_cpp as L
import numpy as np
keep = L.llama_log_callback(lambda level, text, user: None)
L.llama_log_set(keep, ctypes.c_void_p(0))
L.llama_backend_init()
ids, new, f32_kv = json.loads(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
model = L.llama_model_load_from_file(sys.argv[1].encode(), L.llama_model_default_params())
assert model, "load failed"
p = L.llama_context_default_params()
p.n_ctx, p.n_batch, p.n_threads, p.n_threads_batch = len(ids) + new, len(ids), 1, 1
if f32_kv:
    p.type_k = p.type_v = 0  # GGML_TYPE_F32
    p.flash_attn_type = 0  # off: with flash attention, an F32 cache alone changed no logit here
ctx = L.llama_init_from_model(model, p)
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
  const r = spawnSync(python, args, { encoding: 'utf8', timeout: 120_000 });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout.trim().split('\n').at(-1) ?? '{}');
}
