"""Tiny Hugging Face checkpoints plus PyTorch reference numerics for the TS engine tests.

Run:  /usr/bin/python3 scripts/make_fixtures.py     (torch >= 1.13, numpy; CPU, float32)

Writes test/fixtures/models/<name>/ (HF-format checkpoints + byte-level BPE tokenizers) and
test/fixtures/<name>.fixture.{safetensors,json} (inputs, logits, log-probs, loss, gradients).
`transformers`, `tokenizers` and `safetensors` are not needed: the two architectures, the BPE
trainer and the safetensors writer are re-implemented here, following HF semantics line for line.
Output is byte-for-byte deterministic. Read by test/model/pytorch-parity.test.ts and by the
tokenizer, loader, config, sampling, LoRA, GGUF, env and CLI tests.

scripts/make_transformers_fixtures.py writes the counterpart from `transformers` itself
(test/fixtures/transformers/: LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM and
GPT2LMHeadModel checkpoints from save_pretrained, with their logits and gradients), so this
re-implementation cannot drift from HF unnoticed.

Legend: B batch, T time, C hidden size, H query heads, KV key/value heads, D head dim, V vocab.
"""

import json
import math
import re
import shutil
import struct
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "test" / "fixtures"
MODELS = OUT / "models"

# Weight scales. HF's std 0.02 makes attention almost uniform at this size, which hides RoPE,
# mask and GQA bugs; 1/sqrt(fan_in)-like scales keep attention peaked and logits O(1).
EMBED_STD = 0.3
LINEAR_STD = 0.25
BIAS_STD = 0.1
NORM_JITTER = 0.2  # norm weights ~ 1 + N(0, 0.2^2), LayerNorm biases ~ N(0, 0.1^2)

B, T = 3, 12
ADV = [1.0, -0.5, 0.25]


# ---------------------------------------------------------------------------------------------
# safetensors writer: u64 LE header length, JSON header padded with spaces to 8 bytes, raw LE data.

def tensor_bytes(t: torch.Tensor, dtype: str) -> bytes:
    t = t.detach().contiguous()
    if dtype == "F32":
        return t.to(torch.float32).numpy().astype("<f4").tobytes()
    if dtype == "F16":
        return t.to(torch.float16).numpy().astype("<f2").tobytes()
    if dtype == "BF16":
        return t.to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tobytes()
    if dtype == "I32":
        return t.to(torch.int32).numpy().astype("<i4").tobytes()
    raise ValueError(dtype)


def write_safetensors(path: Path, tensors: dict, dtype_of=lambda name: "F32", metadata=None) -> int:
    """tensors: name -> torch.Tensor, laid out in insertion order. Returns payload bytes."""
    header = {"__metadata__": {"format": "pt", **(metadata or {})}}
    blobs, offset = [], 0
    for name, t in tensors.items():
        dtype = dtype_of(name)
        blob = tensor_bytes(t, dtype)
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))
    return offset


def write_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


# ---------------------------------------------------------------------------------------------
# Byte-level BPE tokenizer (GPT-2 byte<->unicode table, merges learned on a fixed corpus).

CORPUS = """
The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs in the sun.
Two agents write the function together: the first writes the helper, the second the main.
def add(a, b):
    return a + b

def main():
    print("hello world")
    for i in range(10):
        if i % 2 == 0:
            print(i, "is even")
    return 0
Then the reward is the number of tests that pass, and the team learns to cooperate.
""" * 2

# GPT-2's pre-tokenizer regex restricted to ASCII classes (Python `re` has no \\p{L}); it only
# shapes which merges get learned, the tokenizer.json carries the real pattern.
TRAIN_SPLIT = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+""")

QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
LLAMA3_SPLIT = QWEN2_SPLIT.replace(r"\p{N}|", r"\p{N}{1,3}|")


def bytes_to_unicode() -> dict:
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def train_bpe(num_merges: int) -> list:
    """Classic BPE on the corpus; ties broken by the smaller pair so the result is deterministic."""
    enc = bytes_to_unicode()
    words: dict = {}
    for w in TRAIN_SPLIT.findall(CORPUS):
        key = tuple(enc[b] for b in w.encode())
        words[key] = words.get(key, 0) + 1
    merges = []
    for _ in range(num_merges):
        counts: dict = {}
        for w, c in words.items():
            for pair in zip(w, w[1:]):
                counts[pair] = counts.get(pair, 0) + c
        best = min(counts, key=lambda p: (-counts[p], p))
        merges.append(best)
        merged = {}
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            merged[tuple(out)] = merged.get(tuple(out), 0) + c
        words = merged
    return merges


def added_token(id_: int, content: str) -> dict:
    return {"id": id_, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": True}


def make_tokenizer(vocab_size: int, specials: list, style: str) -> tuple:
    """style: "gpt2" (ByteLevel regex, specials also in model.vocab, string merges),
    "llama3" (Split + ByteLevel, BOS added by TemplateProcessing), "qwen2" (NFC + Split + ByteLevel).
    Returns (tokenizer.json dict, {special: id})."""
    byte_chars = sorted(bytes_to_unicode().values())  # GPT-2 order: id i <-> i-th char
    merges = train_bpe(vocab_size - 256 - len(specials))
    vocab = {ch: i for i, ch in enumerate(byte_chars)}
    for a, b in merges:
        vocab[a + b] = len(vocab)
    assert len(vocab) == vocab_size - len(specials), "a merge produced a duplicate token"
    special_ids = {s: vocab_size - len(specials) + i for i, s in enumerate(specials)}
    if style == "gpt2":
        vocab.update(special_ids)
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    no_regex = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    model = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
             "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
             "ignore_merges": style == "llama3", "vocab": vocab,
             "merges": [f"{a} {b}" for a, b in merges] if style == "gpt2" else [[a, b] for a, b in merges]}
    split = {"type": "Split", "pattern": {"Regex": QWEN2_SPLIT if style == "qwen2" else LLAMA3_SPLIT}, "behavior": "Isolated", "invert": False}
    if style == "gpt2":
        normalizer, pre, post, dec = None, byte_level, byte_level, byte_level
    elif style == "qwen2":
        normalizer = {"type": "NFC"}
        pre = {"type": "Sequence", "pretokenizers": [split, no_regex]}
        post, dec = no_regex, no_regex
    else:
        bos = specials[0]
        normalizer, dec = None, no_regex
        pre = {"type": "Sequence", "pretokenizers": [split, no_regex]}
        template = {"type": "TemplateProcessing",
                    "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                    "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                             {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                    "special_tokens": {bos: {"id": bos, "ids": [special_ids[bos]], "tokens": [bos]}}}
        post = {"type": "Sequence", "processors": [no_regex, template]}
    tok = {"version": "1.0", "truncation": None, "padding": None,
           "added_tokens": [added_token(i, s) for s, i in special_ids.items()],
           "normalizer": normalizer, "pre_tokenizer": pre, "post_processor": post, "decoder": dec, "model": model}
    return tok, special_ids


def added_tokens_decoder(special_ids: dict) -> dict:
    return {str(i): {k: v for k, v in added_token(i, s).items() if k != "id"} for s, i in special_ids.items()}


CHATML_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


# ---------------------------------------------------------------------------------------------
# Llama / Qwen2 (HF LlamaForCausalLM / Qwen2ForCausalLM, eager attention).

def rms_norm(x, w, eps):
    x32 = x.to(torch.float32)
    return w * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rope_cos_sin(position_ids, head_dim, theta):
    """position_ids [B,T] -> cos, sin [B,T,D], HF LlamaRotaryEmbedding (default rope type)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    freqs = (inv_freq[None, :, None] @ position_ids[:, None, :].float()).transpose(1, 2)  # [B,T,D/2]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def repeat_kv(x, n_rep):
    """[B,KV,T,D] -> [B,KV*n_rep,T,D]; query head h reads kv head h // n_rep."""
    b, kv, t, d = x.shape
    return x[:, :, None].expand(b, kv, n_rep, t, d).reshape(b, kv * n_rep, t, d)


def attention_bias(attention_mask, dtype=torch.float32):
    """[B,T] 0/1 -> additive [B,1,T,T]: 0 where key j <= query i and key j is real, else finfo.min."""
    t = attention_mask.shape[1]
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    allowed = causal[None] & attention_mask[:, None, :].bool()
    bias = torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)
    return bias[:, None]


LLAMA_OPS = {"rotate_half": rotate_half, "repeat_kv": repeat_kv}


def llama_forward(p, cfg, input_ids, attention_mask, position_ids, ops=LLAMA_OPS):
    """Returns logits [B,T,V]. p maps HF parameter names to tensors; qwen2 q/k/v biases are used if present."""
    bsz, t = input_ids.shape
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or cfg["hidden_size"] // nh
    eps = cfg["rms_norm_eps"]
    x = p["model.embed_tokens.weight"][input_ids]  # [B,T,C]
    cos, sin = rope_cos_sin(position_ids, hd, cfg["rope_theta"])
    cos, sin = cos[:, None], sin[:, None]  # [B,1,T,D]
    bias = attention_bias(attention_mask)
    for i in range(cfg["num_hidden_layers"]):
        pre = f"model.layers.{i}."
        h = rms_norm(x, p[pre + "input_layernorm.weight"], eps)

        def proj(name, heads):
            y = F.linear(h, p[pre + f"self_attn.{name}.weight"], p.get(pre + f"self_attn.{name}.bias"))
            return y.view(bsz, t, heads, hd).transpose(1, 2)  # [B,heads,T,D]

        q, k, v = proj("q_proj", nh), proj("k_proj", nkv), proj("v_proj", nkv)
        q = q * cos + ops["rotate_half"](q) * sin
        k = k * cos + ops["rotate_half"](k) * sin
        k, v = ops["repeat_kv"](k, nh // nkv), ops["repeat_kv"](v, nh // nkv)
        scores = q @ k.transpose(2, 3) * hd ** -0.5 + bias  # [B,H,T,T]
        probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        o = (probs @ v).transpose(1, 2).reshape(bsz, t, nh * hd)
        x = x + F.linear(o, p[pre + "self_attn.o_proj.weight"])
        h = rms_norm(x, p[pre + "post_attention_layernorm.weight"], eps)
        m = F.silu(F.linear(h, p[pre + "mlp.gate_proj.weight"])) * F.linear(h, p[pre + "mlp.up_proj.weight"])
        x = x + F.linear(m, p[pre + "mlp.down_proj.weight"])
    x = rms_norm(x, p["model.norm.weight"], eps)
    head = p["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else p["lm_head.weight"]
    return F.linear(x, head)


def llama_init(cfg, gen):
    c, nh, nkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or c // nh
    inter, v = cfg["intermediate_size"], cfg["vocab_size"]
    qkv_bias = cfg["model_type"] == "qwen2"
    normal = lambda *shape, std: torch.randn(*shape, generator=gen) * std
    norm = lambda n: 1.0 + normal(n, std=NORM_JITTER)
    p = {"model.embed_tokens.weight": normal(v, c, std=EMBED_STD)}
    for i in range(cfg["num_hidden_layers"]):
        pre = f"model.layers.{i}."
        p[pre + "input_layernorm.weight"] = norm(c)
        for name, out in (("q_proj", nh * hd), ("k_proj", nkv * hd), ("v_proj", nkv * hd)):
            p[pre + f"self_attn.{name}.weight"] = normal(out, c, std=LINEAR_STD)
            if qkv_bias:
                p[pre + f"self_attn.{name}.bias"] = normal(out, std=BIAS_STD)
        p[pre + "self_attn.o_proj.weight"] = normal(c, nh * hd, std=LINEAR_STD)
        p[pre + "post_attention_layernorm.weight"] = norm(c)
        p[pre + "mlp.gate_proj.weight"] = normal(inter, c, std=LINEAR_STD)
        p[pre + "mlp.up_proj.weight"] = normal(inter, c, std=LINEAR_STD)
        p[pre + "mlp.down_proj.weight"] = normal(c, inter, std=LINEAR_STD / 1.5)
    p["model.norm.weight"] = norm(c)
    if not cfg["tie_word_embeddings"]:
        p["lm_head.weight"] = normal(v, c, std=LINEAR_STD)
    return p


# ---------------------------------------------------------------------------------------------
# GPT-2 (HF GPT2LMHeadModel). Conv1D weights are [in, out]: y = x @ W + b.

def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


GPT2_OPS = {"gelu": gelu_new, "conv1d": lambda x, w, b: torch.addmm(b, x.reshape(-1, x.shape[-1]), w).view(*x.shape[:-1], -1)}


def gpt2_forward(p, cfg, input_ids, attention_mask, position_ids, ops=GPT2_OPS):
    """Returns logits [B,T,V]; p uses the `transformer.`-prefixed names."""
    bsz, t = input_ids.shape
    c, nh, eps = cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
    hd = c // nh
    conv = ops["conv1d"]
    x = p["transformer.wte.weight"][input_ids] + p["transformer.wpe.weight"][position_ids]  # [B,T,C]
    bias = attention_bias(attention_mask)
    for i in range(cfg["n_layer"]):
        pre = f"transformer.h.{i}."
        h = F.layer_norm(x, (c,), p[pre + "ln_1.weight"], p[pre + "ln_1.bias"], eps)
        qkv = conv(h, p[pre + "attn.c_attn.weight"], p[pre + "attn.c_attn.bias"])  # [B,T,3C]
        q, k, v = (y.view(bsz, t, nh, hd).transpose(1, 2) for y in qkv.split(c, dim=2))
        scores = q @ k.transpose(-1, -2) / torch.full([], v.size(-1) ** 0.5) + bias
        probs = torch.softmax(scores, dim=-1)
        o = (probs @ v).transpose(1, 2).reshape(bsz, t, c)
        x = x + conv(o, p[pre + "attn.c_proj.weight"], p[pre + "attn.c_proj.bias"])
        h = F.layer_norm(x, (c,), p[pre + "ln_2.weight"], p[pre + "ln_2.bias"], eps)
        m = ops["gelu"](conv(h, p[pre + "mlp.c_fc.weight"], p[pre + "mlp.c_fc.bias"]))
        x = x + conv(m, p[pre + "mlp.c_proj.weight"], p[pre + "mlp.c_proj.bias"])
    x = F.layer_norm(x, (c,), p["transformer.ln_f.weight"], p["transformer.ln_f.bias"], eps)
    return F.linear(x, p["transformer.wte.weight"])


def gpt2_init(cfg, gen):
    c, v, npos = cfg["n_embd"], cfg["vocab_size"], cfg["n_positions"]
    normal = lambda *shape, std: torch.randn(*shape, generator=gen) * std
    p = {"transformer.wte.weight": normal(v, c, std=EMBED_STD), "transformer.wpe.weight": normal(npos, c, std=EMBED_STD / 2)}
    for i in range(cfg["n_layer"]):
        pre = f"transformer.h.{i}."
        for ln in ("ln_1", "ln_2"):
            p[pre + ln + ".weight"] = 1.0 + normal(c, std=NORM_JITTER)
            p[pre + ln + ".bias"] = normal(c, std=BIAS_STD)
        for name, (fan_in, fan_out) in (("attn.c_attn", (c, 3 * c)), ("attn.c_proj", (c, c)),
                                        ("mlp.c_fc", (c, 4 * c)), ("mlp.c_proj", (4 * c, c))):
            p[pre + name + ".weight"] = normal(fan_in, fan_out, std=LINEAR_STD * math.sqrt(32 / fan_in))
            p[pre + name + ".bias"] = normal(fan_out, std=BIAS_STD)
    p["transformer.ln_f.weight"] = 1.0 + normal(c, std=NORM_JITTER)
    p["transformer.ln_f.bias"] = normal(c, std=BIAS_STD)
    return p


# ---------------------------------------------------------------------------------------------
# Batches, loss, greedy decoding.

def positions_from_mask(mask):
    """HF convention for padded batches: cumsum(mask) - 1, clamped at 0 ([B,T] int64)."""
    return (mask.long().cumsum(-1) - 1).clamp(min=0)


def padded_batch(vocab_size, pad_id, gen):
    """Row 0 full, row 1 left-padded by 3, row 2 right-padded by 2."""
    ids = torch.randint(0, vocab_size, (B, T), generator=gen)
    mask = torch.ones(B, T, dtype=torch.long)
    mask[1, :3] = 0
    mask[2, T - 2:] = 0
    ids[mask == 0] = pad_id
    return ids, mask


def next_token_logp(logits, input_ids):
    """logp[b,t] = log_softmax(logits[b,t])[input_ids[b,t+1]], [B,T-1]."""
    return torch.log_softmax(logits[:, :-1].float(), -1).gather(-1, input_ids[:, 1:, None])[..., 0]


def pg_loss(logp, mask, adv):
    """-sum_{b,t} adv[b] * logp[b,t] * valid[b,t] / B with valid = mask[t] & mask[t+1]."""
    valid = (mask[:, :-1] * mask[:, 1:]).float()
    return -(adv[:, None] * logp * valid).sum() / logp.shape[0], valid


def greedy(forward, prompt_ids, prompt_mask, steps):
    """Argmax decoding by full re-forward; returns new tokens [B,steps] and the smallest top1-top2 gap."""
    ids, mask, gaps = prompt_ids, prompt_mask, []
    for _ in range(steps):
        with torch.no_grad():
            last = forward(ids, mask, positions_from_mask(mask))[:, -1]
        top2 = last.topk(2, dim=-1).values
        gaps.append((top2[:, 0] - top2[:, 1]).min().item())
        nxt = last.argmax(-1, keepdim=True)
        ids = torch.cat([ids, nxt], 1)
        mask = torch.cat([mask, torch.ones_like(nxt)], 1)
    return ids[:, prompt_ids.shape[1]:], min(gaps)


# ---------------------------------------------------------------------------------------------
# Model folders and fixture files.

def write_tokenizer(folder: Path, tok: dict, tok_config: dict) -> None:
    write_json(folder / "tokenizer.json", tok)
    write_json(folder / "tokenizer_config.json", tok_config)


def compute_fixture(forward, params, ids, mask, adv, with_grads=True):
    """Forward + backward on a padded batch; returns the fixture tensors (without inputs)."""
    p = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    pos = positions_from_mask(mask)
    logits = forward(p, ids, mask, pos)
    logp = next_token_logp(logits, ids)
    loss, valid = pg_loss(logp, mask, adv)
    out = {"position_ids": pos, "valid_query": mask, "valid": valid, "logits": logits, "logp": logp,
           "loss": loss.reshape(1)}
    if with_grads:
        loss.backward()
        out.update({f"grad.{k}": v.grad for k, v in p.items()})
    return out


def fixture_tensors(prefix, ids, mask, adv, result):
    tensors = {f"{prefix}input_ids": ids, f"{prefix}attention_mask": mask}
    if adv is not None:
        tensors[f"{prefix}adv"] = adv
    tensors.update({prefix + k: v for k, v in result.items()})
    return tensors


INT_NAMES = ("input_ids", "attention_mask", "position_ids", "valid_query", "valid", "prompt_ids", "prompt_mask", "new_tokens")


def fixture_dtype(name):
    return "I32" if name.split(".")[-1] in INT_NAMES else "F32"


def write_fixture(name, model_dir, tensors, notes):
    path = OUT / f"{name}.fixture.safetensors"
    write_safetensors(path, tensors, fixture_dtype, {"model": model_dir})
    describe = {k: {"dtype": fixture_dtype(k), "shape": list(v.shape)} for k, v in tensors.items()}
    write_json(OUT / f"{name}.fixture.json", {"model": f"test/fixtures/models/{model_dir}", **notes, "tensors": describe})


COMMON_NOTES = {
    "batch": "B=3,T=12; row 0 unpadded, row 1 left-padded by 3, row 2 right-padded by 2 (pad positions hold the pad id)",
    "position_ids": "cumsum(attention_mask)-1 clamped at 0",
    "logits": "compare only rows where valid_query[b,t]==1 (padded query rows are garbage in HF)",
    "logp": "logp[b,t] = log_softmax(logits[b,t])[input_ids[b,t+1]], t < T-1",
    "loss": "-sum_{b,t} adv[b]*logp[b,t]*valid[b,t] / B, valid[b,t] = mask[b,t]*mask[b,t+1]",
    "grads": "grad.<param> = dloss/dparam in fp32; a tied embedding's gradient sums both uses",
    "greedy": "greedy.new_tokens = argmax decoding of greedy.prompt_ids (left-padded) for N steps, no EOS stop; "
              "greedy_min_gap is the smallest top1-top2 logit gap seen (prompts are redrawn until it is >= 0.02)",
}


def greedy_fixture(forward, vocab_size, pad_id, gen, steps=6, min_gap=0.02):
    """Draws prompts until every argmax wins by >= min_gap, so fp32 noise cannot flip a token."""
    mask = torch.ones(2, 8, dtype=torch.long)
    mask[1, :3] = 0
    for _ in range(50):
        prompt = torch.randint(0, vocab_size - 4, (2, 8), generator=gen)
        prompt[mask == 0] = pad_id
        new, gap = greedy(forward, prompt, mask, steps)
        if gap >= min_gap:
            return {"greedy.prompt_ids": prompt, "greedy.prompt_mask": mask, "greedy.new_tokens": new}, gap
    raise RuntimeError("no prompt with a clear greedy margin; change the seed")


# ---------------------------------------------------------------------------------------------
# Sensitivity checks: each plausible bug must move valid logits visibly, or the fixture is too weak.

def max_valid_diff(a, b, mask):
    return (a - b).abs()[mask.bool()].max().item()


def sensitivity(forward_with_ops, base_ops, params, ids, mask, mutations):
    """mutations: name -> (params, attention_mask, position_ids, ops overrides), None = unchanged.
    Returns name -> max |logit change| over valid queries; fails if any change is below 1e-3."""
    with torch.no_grad():
        ref = forward_with_ops(params, ids, mask, positions_from_mask(mask), base_ops)
        report = {}
        for name, (p, m, pos, ops) in mutations.items():
            out = forward_with_ops(p or params, ids, m if m is not None else mask,
                                   pos if pos is not None else positions_from_mask(mask), {**base_ops, **(ops or {})})
            report[name] = round(max_valid_diff(ref, out, mask), 5)
    for name, d in report.items():
        assert d > 1e-3, f"fixture would not catch '{name}' (max diff {d})"
    return report


def llama_mutations(params, cfg, ids, mask):
    interleaved = lambda x: torch.stack((-x[..., 1::2], x[..., ::2]), -1).flatten(-2)
    tiled_kv = lambda x, n: x.repeat(1, n, 1, 1)
    muts = {
        "no rope": (None, None, torch.zeros_like(ids), None),
        "padding mask ignored": (None, torch.ones_like(mask), None, None),
        "interleaved rope": (None, None, None, {"rotate_half": interleaved}),
        "kv heads tiled instead of repeated": (None, None, None, {"repeat_kv": tiled_kv}),
        "norm weight ignored": ({**params, "model.norm.weight": torch.ones_like(params["model.norm.weight"])}, None, None, None),
    }
    if cfg["model_type"] == "qwen2":
        muts["qkv bias dropped"] = ({k: (torch.zeros_like(v) if k.endswith("proj.bias") else v) for k, v in params.items()}, None, None, None)
    return muts


def gpt2_mutations(params, ids, mask):
    exact_gelu = {"gelu": F.gelu}
    transposed = {"conv1d": lambda x, w, b: GPT2_OPS["conv1d"](x, w.t().contiguous() if w.shape[0] == w.shape[1] else w, b)}
    return {
        "exact gelu instead of tanh": (None, None, None, exact_gelu),
        "square Conv1D weights transposed": (None, None, None, transposed),
        "positions 0..T-1 despite padding": (None, None, torch.arange(T).expand(B, T), None),
        "padding mask ignored": (None, torch.ones_like(mask), None, None),
    }


# ---------------------------------------------------------------------------------------------

def llama_config(model_type, vocab, hidden, inter, heads, kv_heads, theta, tied, bos, eos, dtype, head_dim_key):
    cfg = {
        "architectures": ["LlamaForCausalLM" if model_type == "llama" else "Qwen2ForCausalLM"],
        "attention_dropout": 0.0,
        "bos_token_id": bos,
        "eos_token_id": eos,
        "hidden_act": "silu",
        "hidden_size": hidden,
        "initializer_range": 0.02,
        "intermediate_size": inter,
        "max_position_embeddings": 64,
        "model_type": model_type,
        "num_attention_heads": heads,
        "num_hidden_layers": 2,
        "num_key_value_heads": kv_heads,
        "rms_norm_eps": 1e-6 if model_type == "qwen2" else 1e-5,
        "rope_scaling": None,
        "rope_theta": theta,
        "tie_word_embeddings": tied,
        "torch_dtype": dtype,
        "transformers_version": "4.46.0",
        "use_cache": True,
        "vocab_size": vocab,
    }
    if model_type == "llama":
        cfg.update({"attention_bias": False, "mlp_bias": False, "pretraining_tp": 1})
    else:
        cfg.update({"max_window_layers": 2, "sliding_window": 64, "use_sliding_window": False})
    if head_dim_key:
        cfg["head_dim"] = hidden // heads
    return dict(sorted(cfg.items()))


def make_llama():
    gen = torch.Generator().manual_seed(1)
    tok, sp = make_tokenizer(280, ["<|begin_of_text|>", "<|end_of_text|>"], "llama3")
    bos, eos = sp["<|begin_of_text|>"], sp["<|end_of_text|>"]
    cfg = llama_config("llama", 280, 32, 64, 4, 2, 10000.0, False, bos, eos, "float32", True)
    params = llama_init(cfg, gen)
    tok_config = {"add_bos_token": True, "add_eos_token": False, "added_tokens_decoder": added_tokens_decoder(sp),
                  "bos_token": "<|begin_of_text|>", "clean_up_tokenization_spaces": False,
                  "eos_token": "<|end_of_text|>", "model_input_names": ["input_ids", "attention_mask"],
                  "model_max_length": 64, "tokenizer_class": "PreTrainedTokenizerFast"}
    gen_config = {"bos_token_id": bos, "do_sample": True, "eos_token_id": eos, "temperature": 0.6, "top_p": 0.9,
                  "transformers_version": "4.46.0"}
    fwd = lambda p, i, m, pos: llama_forward(p, cfg, i, m, pos)
    ids, mask = padded_batch(280, eos, gen)
    adv = torch.tensor(ADV)
    greedy_t, gap = greedy_fixture(lambda i, m, pos: fwd(params, i, m, pos), 280, eos, gen)
    sens = sensitivity(lambda p, i, m, pos, ops: llama_forward(p, cfg, i, m, pos, ops), LLAMA_OPS, params, ids, mask,
                       llama_mutations(params, cfg, ids, mask))

    for variant, dtype, st in (("", "float32", "F32"), ("-bf16", "bfloat16", "BF16"), ("-fp16", "float16", "F16")):
        name = "tiny-llama" + variant
        folder = MODELS / name
        write_json(folder / "config.json", {**cfg, "torch_dtype": dtype})
        write_json(folder / "generation_config.json", gen_config)
        write_tokenizer(folder, tok, tok_config)
        write_safetensors(folder / "model.safetensors", params, lambda _: st)
        # Expected numerics come from the stored (rounded) weights, up-cast to fp32.
        stored = {k: v.to({"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}[st]).float()
                  for k, v in params.items()}
        result = compute_fixture(fwd, stored, ids, mask, adv, with_grads=(st == "F32"))
        tensors = fixture_tensors("", ids, mask, adv, result)
        if st == "F32":
            tensors.update(greedy_t)
        notes = {**COMMON_NOTES, "weights_dtype": st}
        if st == "F32":
            notes.update({"greedy_min_gap": round(gap, 6), "sensitivity_max_logit_diff": sens,
                          "also_valid_for": "test/fixtures/models/tiny-llama-sharded (same weights)"})
        else:
            notes["grads"] = "not stored for this dtype variant (see tiny-llama)"
            notes.pop("greedy")
        write_fixture(name, name, tensors, notes)

    # Sharded copy: embeddings + layer 0 in shard 1, the rest in shard 2.
    folder = MODELS / "tiny-llama-sharded"
    write_json(folder / "config.json", cfg)
    write_json(folder / "generation_config.json", gen_config)
    write_tokenizer(folder, tok, tok_config)
    first = {k: v for k, v in params.items() if k.startswith(("model.embed_tokens.", "model.layers.0."))}
    second = {k: v for k, v in params.items() if k not in first}
    shard_names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    total = sum(write_safetensors(folder / f, shard) for f, shard in zip(shard_names, (first, second)))
    weight_map = {k: shard_names[0] if k in first else shard_names[1] for k in sorted(params)}
    write_json(folder / "model.safetensors.index.json", {"metadata": {"total_size": total}, "weight_map": weight_map})
    return sens, gap


def make_qwen2():
    gen = torch.Generator().manual_seed(2)
    tok, sp = make_tokenizer(296, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], "qwen2")
    eot, im_end = sp["<|endoftext|>"], sp["<|im_end|>"]
    cfg = llama_config("qwen2", 296, 32, 80, 4, 2, 1000000.0, True, eot, im_end, "float32", False)
    params = llama_init(cfg, gen)
    tok_config = {"add_prefix_space": False, "added_tokens_decoder": added_tokens_decoder(sp),
                  "additional_special_tokens": ["<|im_start|>", "<|im_end|>"], "bos_token": None,
                  "chat_template": CHATML_TEMPLATE, "clean_up_tokenization_spaces": False, "eos_token": "<|im_end|>",
                  "errors": "replace", "model_max_length": 64, "pad_token": "<|endoftext|>",
                  "split_special_tokens": False, "tokenizer_class": "Qwen2Tokenizer", "unk_token": None}
    gen_config = {"bos_token_id": eot, "do_sample": True, "eos_token_id": [im_end, eot], "pad_token_id": eot,
                  "repetition_penalty": 1.05, "temperature": 0.7, "top_k": 20, "top_p": 0.8,
                  "transformers_version": "4.46.0"}
    folder = MODELS / "tiny-qwen2"
    write_json(folder / "config.json", cfg)
    write_json(folder / "generation_config.json", gen_config)
    write_tokenizer(folder, tok, tok_config)
    write_safetensors(folder / "model.safetensors", params)
    fwd = lambda p, i, m, pos: llama_forward(p, cfg, i, m, pos)
    ids, mask = padded_batch(296, eot, gen)
    adv = torch.tensor(ADV)
    greedy_t, gap = greedy_fixture(lambda i, m, pos: fwd(params, i, m, pos), 296, eot, gen)
    sens = sensitivity(lambda p, i, m, pos, ops: llama_forward(p, cfg, i, m, pos, ops), LLAMA_OPS, params, ids, mask,
                       llama_mutations(params, cfg, ids, mask))
    tensors = {**fixture_tensors("", ids, mask, adv, compute_fixture(fwd, params, ids, mask, adv)), **greedy_t}
    write_fixture("tiny-qwen2", "tiny-qwen2", tensors,
                  {**COMMON_NOTES, "weights_dtype": "F32", "greedy_min_gap": round(gap, 6), "sensitivity_max_logit_diff": sens})
    return sens, gap


def make_gpt2():
    gen = torch.Generator().manual_seed(3)
    tok, sp = make_tokenizer(288, ["<|endoftext|>"], "gpt2")
    eot = sp["<|endoftext|>"]
    cfg = {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
           "bos_token_id": eot, "embd_pdrop": 0.1, "eos_token_id": eot, "initializer_range": 0.02,
           "layer_norm_epsilon": 1e-5, "model_type": "gpt2", "n_embd": 32, "n_head": 4, "n_inner": None,
           "n_layer": 2, "n_positions": 64, "resid_pdrop": 0.1, "scale_attn_weights": True,
           "torch_dtype": "float32", "transformers_version": "4.46.0", "use_cache": True, "vocab_size": 288}
    params = gpt2_init(cfg, gen)
    tok_config = {"add_prefix_space": False, "added_tokens_decoder": added_tokens_decoder(sp),
                  "bos_token": "<|endoftext|>", "clean_up_tokenization_spaces": False, "eos_token": "<|endoftext|>",
                  "errors": "replace", "model_max_length": 64, "tokenizer_class": "GPT2Tokenizer",
                  "unk_token": "<|endoftext|>"}
    gen_config = {"bos_token_id": eot, "eos_token_id": eot, "transformers_version": "4.46.0"}

    # tiny-gpt2: save_pretrained layout (prefixed, no lm_head, no mask buffers).
    folder = MODELS / "tiny-gpt2"
    write_json(folder / "config.json", cfg)
    write_json(folder / "generation_config.json", gen_config)
    write_tokenizer(folder, tok, tok_config)
    write_safetensors(folder / "model.safetensors", params)
    # tiny-gpt2-noprefix: the original openai layout (no prefix, legacy causal-mask buffers).
    legacy = {}
    for k, v in params.items():
        legacy[k[len("transformer."):]] = v
        if k.endswith("attn.c_attn.weight"):
            n = cfg["n_positions"]
            legacy[k[len("transformer."):].replace("c_attn.weight", "bias")] = torch.ones(n, n).tril().view(1, 1, n, n)
    noprefix = MODELS / "tiny-gpt2-noprefix"
    write_json(noprefix / "config.json", cfg)
    write_json(noprefix / "generation_config.json", gen_config)
    write_tokenizer(noprefix, tok, tok_config)
    write_safetensors(noprefix / "model.safetensors", legacy)

    fwd = lambda p, i, m, pos: gpt2_forward(p, cfg, i, m, pos)
    ids, mask = padded_batch(288, eot, gen)
    adv = torch.tensor(ADV)
    nopad_ids = torch.randint(0, 288, (B, T), generator=gen)
    nopad_mask = torch.ones(B, T, dtype=torch.long)
    greedy_t, gap = greedy_fixture(lambda i, m, pos: fwd(params, i, m, pos), 288, eot, gen)
    sens = sensitivity(lambda p, i, m, pos, ops: gpt2_forward(p, cfg, i, m, pos, ops), GPT2_OPS, params, ids, mask,
                       gpt2_mutations(params, ids, mask))
    tensors = {**fixture_tensors("", ids, mask, adv, compute_fixture(fwd, params, ids, mask, adv)),
               **fixture_tensors("nopad.", nopad_ids, nopad_mask, None,
                                 compute_fixture(fwd, params, nopad_ids, nopad_mask, adv, with_grads=False)),
               **greedy_t}
    notes = {**COMMON_NOTES, "weights_dtype": "F32", "greedy_min_gap": round(gap, 6), "sensitivity_max_logit_diff": sens,
             "nopad": "nopad.* = same quantities for an unpadded batch (positions 0..T-1), same adv",
             "param_names": "grad.* use the prefixed names of tiny-gpt2; tiny-gpt2-noprefix holds the same weights",
             "also_valid_for": "test/fixtures/models/tiny-gpt2-noprefix"}
    write_fixture("tiny-gpt2", "tiny-gpt2", tensors, notes)
    return sens, gap


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)  # fixed reduction order
    if MODELS.exists():
        shutil.rmtree(MODELS)
    for stale in OUT.glob("*.fixture.*"):
        stale.unlink()
    for make in (make_llama, make_qwen2, make_gpt2):
        sens, gap = make()
        print(f"{make.__name__}: greedy min gap {gap:.4f}; sensitivity {sens}")
    # Only what this script wrote: test/fixtures also holds other scripts' fixtures.
    written = [f for f in MODELS.rglob("*") if f.is_file()] + list(OUT.glob("*.fixture.*"))
    total = sum(f.stat().st_size for f in written)
    print(f"wrote {MODELS.relative_to(ROOT)} and {OUT.relative_to(ROOT)}/*.fixture.*: {total / 1024:.0f} KiB")
    assert total < 2 * 1024 * 1024, "fixtures must stay under 2 MB"


if __name__ == "__main__":
    main()
