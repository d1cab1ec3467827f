"""llama.cpp side of `magrpo bench` (sampling only): the same model, batches and token counts
through llama-cpp-python's low-level API (the C API of llama.cpp, called through ctypes).

Run by `magrpo bench` (one fresh process per model size and weight type, so peak RSS is per run):
    python scripts/bench_llama.py --model 1m-f32.gguf --threads 2 --reps 3
The GGUF file is the bench's random-weight model written by magrpo's GGUF exporter
(src/model/gguf.ts, no tokenizer: token ids in, logits out), as F32 or as F16 matrices.

Per batch size B: one context with one sequence per row (n_seq_max = B), a KV cache of
prompt + new tokens per sequence, n_batch = n_ubatch = B x prompt tokens (the whole prompt pass
in one llama_decode), n_threads = n_threads_batch = --threads (every decode call holds B >= 2
tokens, so llama.cpp uses n_threads_batch throughout); everything else is llama.cpp's default
(flash attention "auto", F16 KV cache, per-sequence KV streams). A run clears the KV cache,
decodes the B prompts in one batch, then samples and decodes one token per sequence per step:
N new tokens = 1 prompt pass + N - 1 single-token passes, as magrpo and bench_torch.py do.
Sampling draws from softmax(logits / 1) of every sequence with numpy; unlike magrpo's sampler
it does not also compute the log-probs of the whole vocabulary (llama.cpp has no such output).
Untimed warm-up runs per batch (--warmup min,max,seconds), then --reps timed runs. Context creation (and its KV-cache
allocation) is outside the timing; clearing the cache is inside.

Prints one JSON object: llama_cpp_version, params, peak_rss_mb, settings, and the wall and CPU
seconds (CPU of every thread of this process) of each timed run: sample {batch: {wall, cpu}}.
There is no training figure: llama.cpp does not train.
"""

import argparse
import ctypes
import json
import resource

import llama_cpp as L
import numpy as np
from bench_timing import rule, timed

GGML_LOG_LEVEL_ERROR = 4


@L.llama_log_callback
def _log(level, text, _user):
    """llama.cpp logs every tensor it loads; only its errors reach stderr."""
    if level == GGML_LOG_LEVEL_ERROR:
        import sys

        sys.stderr.write(text.decode("utf-8", "replace"))


def make_context(model, batch, prompt_len, new_tokens, threads):
    p = L.llama_context_default_params()
    p.n_seq_max = batch
    p.n_ctx = batch * (prompt_len + new_tokens)
    p.n_batch = p.n_ubatch = batch * prompt_len
    p.n_threads = p.n_threads_batch = threads
    p.no_perf = True
    ctx = L.llama_init_from_model(model, p)
    if not ctx:
        raise RuntimeError(f"llama_init_from_model failed for batch {batch}")
    if L.llama_n_ctx_seq(ctx) < prompt_len + new_tokens:
        raise RuntimeError(f"KV cache of {L.llama_n_ctx_seq(ctx)} positions per sequence, need {prompt_len + new_tokens}")
    return ctx, p


def bench_sample(model, vocab, batch, prompt_len, new_tokens, threads, reps, warmup, rng, shared_prompt=False):
    ctx, params = make_context(model, batch, prompt_len, new_tokens, threads)
    mem = L.llama_get_memory(ctx)
    n = batch * prompt_len
    lb = L.llama_batch_init(n, 0, 1)
    token = np.ctypeslib.as_array(lb.token, shape=(n,))
    pos = np.ctypeslib.as_array(lb.pos, shape=(n,))
    n_seq = np.ctypeslib.as_array(lb.n_seq_id, shape=(n,))
    wants = np.ctypeslib.as_array(lb.logits, shape=(n,))
    n_seq[:] = 1
    prompts = rng.integers(0, vocab, size=(batch, prompt_len), dtype=np.int32)
    if shared_prompt:
        prompts[:] = prompts[0]

    def decode():
        rc = L.llama_decode(ctx, lb)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")
        # The rows asked for, in batch order: one per sequence.
        return np.ctypeslib.as_array(L.llama_get_logits(ctx), shape=(batch, vocab))

    def draw(logits):
        """One token per row from softmax(logits) (temperature 1)."""
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        c = np.cumsum(e, axis=1)
        u = rng.random(batch) * c[:, -1]
        return np.minimum((c < u[:, None]).sum(axis=1), vocab - 1).astype(np.int32)

    def run_shared():
        """One prompt prefilled once in sequence 0, its KV cache copied to the other sequences (as
        magrpo's shared prefill and llama.cpp's server for n > 1), then the same decode as run()."""
        L.llama_memory_clear(mem, True)
        lb.n_tokens = prompt_len
        token[:prompt_len] = prompts[0]
        pos[:prompt_len] = np.arange(prompt_len, dtype=np.int32)
        for i in range(prompt_len):
            lb.seq_id[i][0] = 0
        wants[:] = 0
        wants[prompt_len - 1] = 1
        rc = L.llama_decode(ctx, lb)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")
        row = np.ctypeslib.as_array(L.llama_get_logits(ctx), shape=(1, vocab))
        logits = np.repeat(row, batch, axis=0)
        for s in range(1, batch):
            L.llama_memory_seq_cp(mem, 0, s, -1, -1)
        decode_from(logits)

    def decode_from(logits):
        lb.n_tokens = batch
        for i in range(batch):
            lb.seq_id[i][0] = i
        wants[:batch] = 1
        for step in range(new_tokens):
            tok = draw(logits)
            if step == new_tokens - 1:
                break
            token[:batch] = tok
            pos[:batch] = prompt_len + step
            logits = decode()

    def run():
        L.llama_memory_clear(mem, True)
        # The prompt pass: sequence s holds rows s*P .. s*P+P-1; logits of each last row.
        lb.n_tokens = n
        token[:] = prompts.reshape(-1)
        pos[:] = np.tile(np.arange(prompt_len, dtype=np.int32), batch)
        for i in range(n):
            lb.seq_id[i][0] = i // prompt_len
        wants[:] = 0
        wants[prompt_len - 1 :: prompt_len] = 1
        logits = decode()
        # Then one token per sequence per step: row s is sequence s.
        lb.n_tokens = batch
        for i in range(batch):
            lb.seq_id[i][0] = i
        wants[:batch] = 1
        for step in range(new_tokens):
            tok = draw(logits)
            if step == new_tokens - 1:
                break
            token[:batch] = tok
            pos[:batch] = prompt_len + step
            logits = decode()

    try:
        return timed(run_shared if shared_prompt else run, reps, warmup), {
            "shared_prompt": shared_prompt,
            "n_ctx": L.llama_n_ctx(ctx),
            "n_ctx_seq": L.llama_n_ctx_seq(ctx),
            "n_batch": L.llama_n_batch(ctx),
            "n_ubatch": L.llama_n_ubatch(ctx),
            "n_seq_max": L.llama_n_seq_max(ctx),
            "n_threads": L.llama_n_threads(ctx),
            "n_threads_batch": L.llama_n_threads_batch(ctx),
            "flash_attn_type": params.flash_attn_type,
            "kv_unified": bool(params.kv_unified),
            "type_k": params.type_k,
            "type_v": params.type_v,
        }
    finally:
        L.llama_batch_free(lb)
        L.llama_free(ctx)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="GGUF file")
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--reps", default="3", help="timed runs per batch: N, or min,max,seconds")
    ap.add_argument("--sample-batches", default="8,32")
    ap.add_argument("--prompt-len", type=int, default=16)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--warmup", default="1,1,0", help="untimed runs first, per batch: min,max,seconds")
    ap.add_argument(
        "--no-extra-bufts",
        action="store_true",
        help="load with use_extra_bufts = False: llama.cpp's AMX buffer path SIGILLs on quantized weights on some Xeons (test/helpers/llama-cpp.ts)",
    )
    ap.add_argument(
        "--shared-prompt",
        action="store_true",
        help="one prompt for every sequence, prefilled once and its KV cache copied (llama_memory_seq_cp), as magrpo's G samples share their prompt",
    )
    args = ap.parse_args()
    warmup = rule(args.warmup)
    reps = rule(args.reps)

    L.llama_log_set(_log, ctypes.c_void_p(0))
    L.llama_backend_init()
    mp = L.llama_model_default_params()
    if args.no_extra_bufts:
        mp.use_extra_bufts = False
    model = L.llama_model_load_from_file(args.model.encode(), mp)
    if not model:
        raise SystemExit(f"llama.cpp could not load {args.model}")
    vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(model))
    rng = np.random.default_rng(args.seed)
    desc = ctypes.create_string_buffer(256)
    L.llama_model_desc(model, desc, len(desc))
    sample, contexts = {}, {}
    for b in args.sample_batches.split(","):
        sample[b], contexts[b] = bench_sample(model, vocab, int(b), args.prompt_len, args.new_tokens, args.threads, reps, warmup, rng, args.shared_prompt)
    out = {
        "llama_cpp_version": L.__version__,
        "params": L.llama_model_n_params(model),
        "sample": sample,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "settings": {
            "model": desc.value.decode("utf-8", "replace"),
            "threads": args.threads,
            "use_extra_bufts": bool(mp.use_extra_bufts),
            "contexts": contexts,
            "sampling": "numpy: softmax of the logits at temperature 1, one categorical draw per sequence; no full-vocabulary log-probs",
            "system_info": L.llama_print_system_info().decode("utf-8", "replace").strip(),
            "llama_cpp_file": L.__file__,
        },
    }
    L.llama_model_free(model)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
