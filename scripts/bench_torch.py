"""PyTorch side of `magrpo bench`: the same models, batches and token counts, timed in eager mode.

Run by `magrpo bench` (one fresh process per model size and thread setting, so peak RSS is per size):
    OPENBLAS_NUM_THREADS=1 /usr/bin/python3 scripts/bench_torch.py \
        --config '<HF config.json as JSON>' --threads 2 --reps 3
PyTorch keeps its own defaults (OpenMP wait policy included); the bench only sets torch.set_num_threads
and, per run, the BLAS thread count in the environment, and keeps the better run.
Prints one JSON object: params, peak_rss_mb, the settings it ran with, and the wall and CPU seconds
of each timed repetition: train {wall, cpu}, sample {batch: {wall, cpu}}, with --lora-rank also
train_lora {wall, cpu}, with --bf16 also train_bf16 {wall, cpu} (autocast). magrpo bench turns them into tokens/s.

The models follow HF GPT2LMHeadModel / LlamaForCausalLM / Qwen2ForCausalLM (eager attention, the
formulation torch 1.13 has: matmul + masked softmax), with a preallocated KV cache for decoding, so
both engines do the same arithmetic. Training: forward + cross-entropy + backward + AdamW on B x T
tokens. Sampling: a prompt of P tokens, then N new tokens per sequence (multinomial at temperature
1, plus the log-prob of each drawn token, as magrpo's sampler returns it).
LoRA (--lora-rank r): every linear layer of every block gets y = W x + b + (alpha/r) B (A x), written
here by hand as magrpo computes it (no peft): base weights frozen, A and B trained, AdamW over the
adapters only. Phases run as magrpo's worker runs them: sampling, LoRA training, full fine-tuning;
rss_mb is the peak RSS after each.

Legend: B batch, T new tokens, S cached + new tokens, C hidden, H heads, KV key/value heads, D head dim.
"""

import argparse
import json
import math
import os
import resource

import torch
import torch.nn.functional as F
from bench_timing import rule, timed


class Cache:
    """Per-layer keys/values [B, KV, maxLen, D] and the number of positions filled."""

    def __init__(self, layers, batch, kv_heads, max_len, head_dim):
        shape = (batch, kv_heads, max_len, head_dim)
        self.k = [torch.zeros(shape) for _ in range(layers)]
        self.v = [torch.zeros(shape) for _ in range(layers)]
        self.len = 0


def attend(q, k, v, layer, cache):
    """q [B,H,T,D], k/v [B,KV,T,D] -> [B,T,H*D]; appends k/v to the cache when there is one."""
    b, h, t, d = q.shape
    past = 0
    if cache is not None:
        past = cache.len
        cache.k[layer][:, :, past:past + t] = k
        cache.v[layer][:, :, past:past + t] = v
        k, v = cache.k[layer][:, :, :past + t], cache.v[layer][:, :, :past + t]
    rep = h // k.shape[1]
    if rep > 1:  # grouped-query: query head i reads kv head i // rep
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
    s = q @ k.transpose(-1, -2) / math.sqrt(d)  # [B,H,T,S]
    if t > 1:
        causal = torch.ones(t, past + t, dtype=torch.bool).tril(past)
        s = s.masked_fill(~causal, float("-inf"))
    return (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(b, t, h * d)


class Gpt2(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        c, f, self.h = cfg["n_embd"], cfg.get("n_inner") or 4 * cfg["n_embd"], cfg["n_head"]
        self.eps = cfg.get("layer_norm_epsilon", 1e-5)
        self.wte = torch.nn.Parameter(torch.randn(cfg["vocab_size"], c) * 0.02)
        self.wpe = torch.nn.Parameter(torch.randn(cfg["n_positions"], c) * 0.01)
        self.blocks = torch.nn.ModuleList()
        for _ in range(cfg["n_layer"]):
            blk = torch.nn.Module()
            blk.ln_1, blk.ln_2 = torch.nn.LayerNorm(c, eps=self.eps), torch.nn.LayerNorm(c, eps=self.eps)
            blk.c_attn, blk.c_proj = torch.nn.Linear(c, 3 * c), torch.nn.Linear(c, c)
            blk.c_fc, blk.mlp_proj = torch.nn.Linear(c, f), torch.nn.Linear(f, c)
            self.blocks.append(blk)
        self.ln_f = torch.nn.LayerNorm(c, eps=self.eps)
        self.layers, self.kv_heads, self.head_dim = cfg["n_layer"], self.h, c // self.h

    def forward(self, ids, cache=None):
        b, t = ids.shape
        past = cache.len if cache is not None else 0
        x = self.wte[ids] + self.wpe[past:past + t]
        for i, blk in enumerate(self.blocks):
            q, k, v = blk.c_attn(blk.ln_1(x)).view(b, t, 3, self.h, -1).permute(2, 0, 3, 1, 4)
            x = x + blk.c_proj(attend(q, k, v, i, cache))
            x = x + blk.mlp_proj(F.gelu(blk.c_fc(blk.ln_2(x)), approximate="tanh"))
        if cache is not None:
            cache.len += t
        return self.ln_f(x) @ self.wte.t()


class Llama(torch.nn.Module):
    """Llama, Qwen2 (q/k/v biases) and Mistral without sliding window."""

    def __init__(self, cfg):
        super().__init__()
        c, f, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
        self.h, self.kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        self.head_dim = cfg.get("head_dim") or c // self.h
        self.eps, self.layers = cfg["rms_norm_eps"], cfg["num_hidden_layers"]
        qkv_bias = cfg["model_type"] == "qwen2" or bool(cfg.get("attention_bias"))
        o_bias = cfg["model_type"] == "llama" and bool(cfg.get("attention_bias"))
        mlp_bias = bool(cfg.get("mlp_bias"))
        d, lin = self.head_dim, lambda i, o, bias: torch.nn.Linear(i, o, bias=bias)
        self.embed = torch.nn.Parameter(torch.randn(v, c) * 0.02)
        self.blocks = torch.nn.ModuleList()
        for _ in range(self.layers):
            blk = torch.nn.Module()
            blk.n1, blk.n2 = torch.nn.Parameter(torch.ones(c)), torch.nn.Parameter(torch.ones(c))
            blk.q, blk.k, blk.v = lin(c, self.h * d, qkv_bias), lin(c, self.kv_heads * d, qkv_bias), lin(c, self.kv_heads * d, qkv_bias)
            blk.o = lin(self.h * d, c, o_bias)
            blk.gate, blk.up, blk.down = lin(c, f, mlp_bias), lin(c, f, mlp_bias), lin(f, c, mlp_bias)
            self.blocks.append(blk)
        self.norm = torch.nn.Parameter(torch.ones(c))
        self.head = None if cfg.get("tie_word_embeddings", True) else torch.nn.Parameter(torch.randn(v, c) * 0.02)
        inv_freq = 1.0 / (cfg.get("rope_theta", 10000.0) ** (torch.arange(0, d, 2).float() / d))
        ang = torch.arange(cfg["max_position_embeddings"]).float()[:, None] * inv_freq[None]
        self.cos, self.sin = torch.cat((ang, ang), -1).cos(), torch.cat((ang, ang), -1).sin()  # [P, D]

    def rms(self, x, w):
        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))

    def rope(self, x, cos, sin):
        half = x.shape[-1] // 2
        return x * cos + torch.cat((-x[..., half:], x[..., :half]), -1) * sin

    def forward(self, ids, cache=None):
        b, t = ids.shape
        past = cache.len if cache is not None else 0
        cos, sin = self.cos[past:past + t], self.sin[past:past + t]
        x = self.embed[ids]
        for i, blk in enumerate(self.blocks):
            h = self.rms(x, blk.n1)
            q = self.rope(blk.q(h).view(b, t, self.h, -1).transpose(1, 2), cos, sin)
            k = self.rope(blk.k(h).view(b, t, self.kv_heads, -1).transpose(1, 2), cos, sin)
            v = blk.v(h).view(b, t, self.kv_heads, -1).transpose(1, 2)
            x = x + blk.o(attend(q, k, v, i, cache))
            h = self.rms(x, blk.n2)
            x = x + blk.down(F.silu(blk.gate(h)) * blk.up(h))
        if cache is not None:
            cache.len += t
        return self.rms(x, self.norm) @ (self.embed if self.head is None else self.head).t()


def build(cfg):
    return Gpt2(cfg) if cfg["model_type"] == "gpt2" else Llama(cfg)


class LoraLinear(torch.nn.Module):
    """y = base(x) + (alpha/r) * (x A^T) B^T, base frozen; init as PEFT (and magrpo): A ~ U(+-1/sqrt(in)), B = 0."""

    def __init__(self, base, r, alpha):
        super().__init__()
        self.base, self.scale = base, alpha / r
        bound = 1 / math.sqrt(base.in_features)
        self.A = torch.nn.Parameter(torch.empty(r, base.in_features).uniform_(-bound, bound))  # [r, in]
        self.B = torch.nn.Parameter(torch.zeros(base.out_features, r))  # [out, r]

    def forward(self, x):
        return self.base(x) + F.linear(F.linear(x, self.A), self.B) * self.scale


def add_lora(model, r, alpha):
    """Freezes every parameter and wraps every linear layer of every block; returns the adapters' parameters."""
    for p in model.parameters():
        p.requires_grad_(False)
    adapters = []
    for blk in model.blocks:
        for name, child in list(blk.named_children()):
            if isinstance(child, torch.nn.Linear):
                wrapped = LoraLinear(child, r, alpha)
                setattr(blk, name, wrapped)
                adapters += [wrapped.A, wrapped.B]
    return adapters


def remove_lora(model):
    """Unwraps the adapters and makes every parameter trainable again (full fine-tuning)."""
    for blk in model.blocks:
        for name, child in list(blk.named_children()):
            if isinstance(child, LoraLinear):
                setattr(blk, name, child.base)
    for p in model.parameters():
        p.requires_grad_(True)


def bench_train(model, params, vocab, batch, seq, reps, warmup, gen, bf16=False):
    """bf16: the forward (and so its products' backward) under torch.autocast("cpu", bfloat16),
    PyTorch's mixed precision on a CPU: fp32 weights, gradients and AdamW, as magrpo's
    precision: bf16 keeps them."""
    opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01)
    ids = torch.randint(0, vocab, (batch, seq), generator=gen)
    targets = torch.randint(0, vocab, (batch * seq,), generator=gen)

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(ids)
            loss = F.cross_entropy(logits.view(-1, vocab).float(), targets)
        loss.backward()
        opt.step()
        # PyTorch's fastest: gradients dropped rather than zero-filled (the default since 2.0; 1.13's
        # default fills zeros). magrpo zero-fills its gradients; this is PyTorch's side at its best.
        opt.zero_grad(set_to_none=True)

    return timed(step, reps, warmup)


@torch.inference_mode()
def bench_sample(model, vocab, batch, prompt_len, new_tokens, reps, warmup, gen):
    prompt = torch.randint(0, vocab, (batch, prompt_len), generator=gen)

    def run():
        cache = Cache(model.layers, batch, model.kv_heads, prompt_len + new_tokens, model.head_dim)
        ids = prompt
        for step in range(new_tokens):
            logp = torch.log_softmax(model(ids, cache)[:, -1], dim=-1)  # [B, V]
            tok = torch.multinomial(logp.exp(), 1, generator=gen)  # [B, 1]
            logp.gather(1, tok)  # the sampler also returns each token's log-prob
            ids = tok

    return timed(run, reps, warmup)


def settings():
    """What this PyTorch runs with: threads, the thread/BLAS environment, its BLAS and oneDNN."""
    keys = ["OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY", "OPENBLAS_CORETYPE", "KMP_BLOCKTIME"]
    config = torch.__config__.show()
    blas = next((part.split("=", 1)[1] for part in config.replace(",", " ").split() if part.startswith("BLAS_INFO=")), "unknown")
    return {
        "torch_threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "env": {k: os.environ[k] for k in keys if k in os.environ},
        "blas": blas,
        "mkldnn": torch.backends.mkldnn.is_available(),
        "torch_file": torch.__file__,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True, help="HF config.json of the model, as a JSON string")
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--reps", default="3", help="timed calls per figure: N, or min,max,seconds")
    ap.add_argument("--train-batch", type=int, default=8)
    ap.add_argument("--train-seq", type=int, default=128)
    ap.add_argument("--train-warmup", default="2,5,5", help="untimed training steps first: min,max,seconds")
    ap.add_argument("--sample-batches", default="8,32")
    ap.add_argument("--sample-warmup", default="1,1,0", help="untimed sampling runs first, per batch: min,max,seconds")
    ap.add_argument("--prompt-len", type=int, default=16)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--lora-rank", type=int, default=0, help="also time LoRA training at this rank (0: no)")
    ap.add_argument("--lora-alpha", type=float, default=32)
    ap.add_argument("--bf16", action="store_true", help="also time full training under torch.autocast(cpu, bfloat16), last")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    cfg = json.loads(args.config)
    model = build(cfg)
    vocab = cfg["vocab_size"]
    rss_mb = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # noqa: E731
    warmup = rule(args.train_warmup)
    reps = rule(args.reps)
    out = {
        "torch_version": torch.__version__,
        "threads": torch.get_num_threads(),
        "settings": settings(),
        "params": sum(p.numel() for p in model.parameters()),
        "train_batch": args.train_batch,
        "sample": {
            b: bench_sample(model, vocab, int(b), args.prompt_len, args.new_tokens, reps, rule(args.sample_warmup), gen) for b in args.sample_batches.split(",")
        },
        "rss_mb": {},
    }
    out["rss_mb"]["sample"] = rss_mb()
    if args.lora_rank > 0:
        adapters = add_lora(model, args.lora_rank, args.lora_alpha)
        out["train_lora"] = bench_train(model, adapters, vocab, args.train_batch, args.train_seq, reps, warmup, gen)
        out["lora"] = {
            "r": args.lora_rank,
            "alpha": args.lora_alpha,
            "modules": len(adapters) // 2,
            "trainable_params": sum(p.numel() for p in model.parameters() if p.requires_grad),
        }
        out["rss_mb"]["lora"] = rss_mb()
        remove_lora(model)
        del adapters
    out["train"] = bench_train(model, list(model.parameters()), vocab, args.train_batch, args.train_seq, reps, warmup, gen)
    out["rss_mb"]["full"] = rss_mb()
    out["peak_rss_mb"] = rss_mb()
    if args.bf16:  # last, as magrpo's worker does, so the RSS figures above stay fp32's
        out["train_bf16"] = bench_train(model, list(model.parameters()), vocab, args.train_batch, args.train_seq, reps, warmup, gen, bf16=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
