"""Tiny random-weight checkpoints written by `transformers` itself, with its logits and gradients.

Run:  .cache/venv-learner/bin/python scripts/make_transformers_fixtures.py
      (the venv of `bash scripts/setup.sh --with-learner`, pinned by learner/requirements.txt;
      written with torch 2.15.0, transformers 5.23.0, safetensors 0.8.0; CPU, float32, ~10 s)

Writes test/fixtures/transformers/<name>/ (config.json, generation_config.json and model.safetensors,
all from `save_pretrained`; no tokenizer, the tests feed token ids) and
test/fixtures/transformers/<name>.fixture.{safetensors,json}: a padded batch, what
`<Arch>ForCausalLM.forward` gives for it (logits, next-token log-probs, an advantage-weighted loss,
that loss's gradient w.r.t. every parameter by its HF name) and greedy tokens from `generate()` with
a KV cache. test/model/transformers-parity.test.ts loads each folder with magrpo's loadModel and
compares. Python is not needed at test time. Output is byte-for-byte deterministic.

Which fixtures are which:
  scripts/make_fixtures.py            -> test/fixtures/models/tiny-*, test/fixtures/tiny-*.fixture.*:
      a hand-written Llama/Qwen2/GPT-2 forward (HF semantics re-implemented in plain torch), plus
      tokenizers, sharded/no-prefix/bf16/fp16 variants. Needs only torch. Read by pytorch-parity
      and by the tokenizer, loader, config, sampling, LoRA, GGUF, env and CLI tests.
  scripts/make_transformers_fixtures.py (this file) -> test/fixtures/transformers/*:
      the architectures from `transformers` (LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM,
      GPT2LMHeadModel), so a drift between the hand-written reference and HF itself cannot hide a bug.

Models (2 layers, C=32, V=128 each):
  llama-gqa        LlamaForCausalLM, 4 query / 2 KV heads, untied lm_head, rope_theta 10000
  llama-tied-bias  LlamaForCausalLM, tied embeddings, multi-query (1 KV head), head_dim 16 != C/H,
                   attention_bias (q/k/v/o) and mlp_bias
  qwen2            Qwen2ForCausalLM, q/k/v biases, tied, GQA 4/2, rope_theta 1e6, eps 1e-6
  mistral          MistralForCausalLM, GQA 4/2, untied, sliding_window 4096 (> any test sequence)
  gpt2             GPT2LMHeadModel, Conv1D [in,out] weights, gelu_new, learned positions, tied

Weights: HF's init (std 0.02, norms 1, biases 0) makes attention almost uniform and lets a dropped
norm or bias go unseen, so every parameter is redrawn: embeddings N(0, 0.3^2), matrices
N(0, 0.25^2 * 32/fan_in), biases N(0, 0.1^2), norm weights 1 + N(0, 0.2^2). The script then
checks that each tensor matters: setting it to its neutral value (norm weights 1, biases 0) or
shifting its rows by one (matrices) must move some valid logit by more than 10x the test's logit
tolerance (1e-5 x max |logit|), as must plausible engine bugs (padding mask ignored; interleaved
RoPE; for GPT-2, positions ignoring left padding and exact GELU for its tanh one). The moves are
recorded in each fixture's JSON under "sensitivity".

Numerics: references come from the model in float32 (eager attention, one thread), like the engine
under test. The same weights are also run in float64 and the float32 reference's own error against
it is recorded under "fp32_noise" (max |fp32 - fp64| / max |fp64| per tensor): the tolerance of the
test sits above this floor.

Legend: B batch, T time, C hidden size, H query heads, KV key/value heads, D head dim, V vocab.
"""

import copy
import json
import shutil
import sys
from pathlib import Path

import torch
import transformers
from safetensors.torch import save_file
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)
from transformers.activations import ACT2FN

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "test" / "fixtures" / "transformers"

VOCAB, HIDDEN, INTER, LAYERS, HEADS, MAX_POS = 128, 32, 64, 2, 4, 64
PAD, BOS, EOS = 0, 1, 2
B, T = 3, 12
ADV = [1.0, -0.5, 0.25]
EMBED_STD, LINEAR_STD, BIAS_STD, NORM_JITTER = 0.3, 0.25, 0.1, 0.2
LOGITS_TOL = 1e-5  # test/model/transformers-parity.test.ts's logit tolerance, relative to max |logit|
MIN_MOVE = 10 * LOGITS_TOL  # a sensitivity mutation must move some valid logit by 10x that
MIN_GAP = 0.02  # greedy prompts are redrawn until every argmax wins by this much


def llama_like(config_cls, **kw):
    common = dict(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTER, num_hidden_layers=LAYERS,
                  num_attention_heads=HEADS, max_position_embeddings=MAX_POS, pad_token_id=PAD,
                  bos_token_id=BOS, eos_token_id=EOS)
    return config_cls(**{**common, **kw})


MODELS = {
    "llama-gqa": (LlamaForCausalLM, lambda: llama_like(
        LlamaConfig, num_key_value_heads=2, tie_word_embeddings=False, rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0})),
    "llama-tied-bias": (LlamaForCausalLM, lambda: llama_like(
        LlamaConfig, num_key_value_heads=1, head_dim=16, tie_word_embeddings=True, attention_bias=True,
        mlp_bias=True, rms_norm_eps=1e-5, rope_parameters={"rope_type": "default", "rope_theta": 500000.0})),
    "qwen2": (Qwen2ForCausalLM, lambda: llama_like(
        Qwen2Config, num_key_value_heads=2, tie_word_embeddings=True, rms_norm_eps=1e-6, use_sliding_window=False,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})),
    "mistral": (MistralForCausalLM, lambda: llama_like(
        MistralConfig, num_key_value_heads=2, tie_word_embeddings=False, rms_norm_eps=1e-5, sliding_window=4096,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0})),
    "gpt2": (GPT2LMHeadModel, lambda: GPT2Config(
        vocab_size=VOCAB, n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS, n_positions=MAX_POS,
        activation_function="gelu_new", pad_token_id=PAD, bos_token_id=BOS, eos_token_id=EOS)),
}


# ---------------------------------------------------------------------------------------------
# Model construction.

def is_norm(name: str) -> bool:
    return "norm" in name or ".ln_" in name or name.startswith("transformer.ln_f")


@torch.no_grad()
def randomize(model, gen: torch.Generator) -> None:
    """Redraws every parameter (see the header for the scales); names in sorted order, so the draw
    does not depend on module registration order."""
    for name, p in sorted(model.named_parameters()):
        if is_norm(name) and name.endswith(".weight"):
            p.copy_(1.0 + torch.randn(p.shape, generator=gen) * NORM_JITTER)
        elif name.endswith(".bias"):
            p.copy_(torch.randn(p.shape, generator=gen) * BIAS_STD)
        elif "embed_tokens" in name or ".wte." in name or ".wpe." in name:
            p.copy_(torch.randn(p.shape, generator=gen) * EMBED_STD)
        else:
            # nn.Linear stores [out, in]; GPT-2's Conv1D stores [in, out].
            fan_in = p.shape[0] if name.startswith("transformer.") else p.shape[1]
            p.copy_(torch.randn(p.shape, generator=gen) * LINEAR_STD * (32 / fan_in) ** 0.5)


def build(cls, make_config, seed: int):
    torch.manual_seed(seed)  # HF's own init, overwritten below
    config = make_config()
    config._attn_implementation = "eager"
    model = cls(config).eval()
    randomize(model, torch.Generator().manual_seed(seed))
    return model


# ---------------------------------------------------------------------------------------------
# Batch, loss, reference numerics.

def positions_from_mask(mask):
    """HF's convention for padded batches: cumsum(mask) - 1, clamped at 0 ([B,T] int64)."""
    return (mask.long().cumsum(-1) - 1).clamp(min=0)


def padded_batch(gen):
    """Row 0 full, row 1 left-padded by 3, row 2 right-padded by 2; pads hold PAD."""
    ids = torch.randint(3, VOCAB, (B, T), generator=gen)
    mask = torch.ones(B, T, dtype=torch.long)
    mask[1, :3] = 0
    mask[2, T - 2:] = 0
    ids[mask == 0] = PAD
    return ids, mask


def forward(model, ids, mask):
    return model(input_ids=ids, attention_mask=mask, position_ids=positions_from_mask(mask), use_cache=False).logits


def reference(model, ids, mask, adv):
    """Forward + backward of loss = -sum_{b,t} adv[b] * logp[b,t] * valid[b,t] / B."""
    model.zero_grad(set_to_none=True)
    logits = forward(model, ids, mask)  # [B,T,V]
    logp = torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None])[..., 0]  # [B,T-1]
    valid = mask[:, :-1] * mask[:, 1:]
    loss = -(adv[:, None].to(logp.dtype) * logp * valid).sum() / B
    loss.backward()
    out = {"logits": logits.detach(), "logp": logp.detach(), "loss": loss.detach().reshape(1)}
    # named_parameters() lists a tied head once, under the embedding's name; its gradient sums both uses.
    out.update({f"grad.{k}": p.grad.detach().clone() for k, p in model.named_parameters()})
    return out, valid


def rel_err(a, b, rows=None):
    d, r = (a - b).abs(), b.abs()
    if rows is not None:
        d, r = d[rows], r[rows]
    return (d.max() / r.max().clamp(min=1e-30)).item()


def fp32_noise(model, ids, mask, adv, ref32):
    """The float32 reference's own error against the same model run in float64. SDPA attention here:
    eager attention's softmax runs in float32, where float64's finfo.min mask becomes -inf and a
    fully masked (left-padding) query row turns to NaN."""
    model64 = copy.deepcopy(model).double()
    model64.set_attn_implementation("sdpa")
    ref64, _ = reference(model64, ids, mask, adv)
    rows = mask.bool()
    noise = {"logits": rel_err(ref32["logits"].double(), ref64["logits"], rows)}
    valid = (mask[:, :-1] * mask[:, 1:]).bool()
    noise["logp"] = rel_err(ref32["logp"].double(), ref64["logp"], valid)
    noise["loss"] = rel_err(ref32["loss"].double(), ref64["loss"])
    noise["grads_max"] = max(rel_err(ref32[k].double(), ref64[k]) for k in ref32 if k.startswith("grad."))
    return {k: float(f"{v:.3g}") for k, v in noise.items()}


def greedy(model, gen, steps=6):
    """generate(do_sample=False) on a left-padded batch of 2 prompts, redrawn until every argmax wins
    by >= MIN_GAP; cross-checked against argmax decoding by full re-forward."""
    mask = torch.ones(2, 8, dtype=torch.long)
    mask[1, :3] = 0
    for _ in range(50):
        prompt = torch.randint(3, VOCAB, (2, 8), generator=gen)
        prompt[mask == 0] = PAD
        with torch.no_grad():
            out = model.generate(input_ids=prompt, attention_mask=mask, max_new_tokens=steps, min_new_tokens=steps,
                                 do_sample=False, num_beams=1, output_logits=True, return_dict_in_generate=True,
                                 pad_token_id=PAD, eos_token_id=None)
        new = out.sequences[:, prompt.shape[1]:]
        gap = min((s.topk(2, -1).values[:, 0] - s.topk(2, -1).values[:, 1]).min().item() for s in out.logits)
        if gap < MIN_GAP:
            continue
        ids, m = prompt, mask
        for _ in range(steps):
            with torch.no_grad():
                nxt = forward(model, ids, m)[:, -1].argmax(-1, keepdim=True)
            ids, m = torch.cat([ids, nxt], 1), torch.cat([m, torch.ones_like(nxt)], 1)
        assert torch.equal(ids[:, prompt.shape[1]:], new), "generate() disagrees with full re-forward greedy"
        return {"greedy.prompt_ids": prompt, "greedy.prompt_mask": mask, "greedy.new_tokens": new}, gap
    raise RuntimeError("no prompt with a clear greedy margin; change the seed")


# ---------------------------------------------------------------------------------------------
# Sensitivity: each tensor, and each plausible engine bug, must move valid logits visibly.

@torch.no_grad()
def logit_move(model, ids, mask, ref, pos=None, m=None):
    attn = mask if m is None else m
    logits = model(input_ids=ids, attention_mask=attn, use_cache=False,
                   position_ids=positions_from_mask(mask) if pos is None else pos).logits
    return (logits - ref).abs()[mask.bool()].max().item()


@torch.no_grad()
def sensitivity(model, ids, mask):
    ref = forward(model, ids, mask)
    moves = {}
    for name, p in model.named_parameters():
        saved = p.clone()
        if is_norm(name) and name.endswith(".weight"):
            p.fill_(1.0)
        elif name.endswith(".bias"):
            p.zero_()
        else:
            p.copy_(saved.roll(1, dims=0))
        moves[f"{name} neutral/shifted"] = logit_move(model, ids, mask, ref)
        p.copy_(saved)
    moves["padding mask ignored"] = logit_move(model, ids, mask, ref, m=torch.ones_like(mask))
    module = sys.modules[type(model).__module__]
    if hasattr(module, "rotate_half"):
        original = module.rotate_half
        module.rotate_half = lambda x: torch.stack((-x[..., 1::2], x[..., ::2]), -1).flatten(-2)
        moves["interleaved rope"] = logit_move(model, ids, mask, ref)
        module.rotate_half = original
    else:  # RoPE is shift-invariant, so positions that ignore left padding only matter to GPT-2
        moves["positions 0..T-1 despite padding"] = logit_move(model, ids, mask, ref, pos=torch.arange(T).expand(B, T))
        acts = [blk.mlp.act for blk in model.transformer.h]
        for blk in model.transformer.h:
            blk.mlp.act = ACT2FN["gelu"]
        moves["exact gelu instead of tanh"] = logit_move(model, ids, mask, ref)
        for blk, act in zip(model.transformer.h, acts):
            blk.mlp.act = act
    floor = MIN_MOVE * ref.abs()[mask.bool()].max().item()
    weak = {k: v for k, v in moves.items() if v <= floor}
    assert not weak, f"fixture would not catch {weak} (need > {floor:.2g})"
    return {"min_required": float(f"{floor:.3g}"), **{k: float(f"{v:.4g}") for k, v in moves.items()}}


# ---------------------------------------------------------------------------------------------

INT_NAMES = ("input_ids", "attention_mask", "position_ids", "valid_query", "valid", "prompt_ids", "prompt_mask", "new_tokens")

NOTES = {
    "batch": "B=3,T=12; row 0 unpadded, row 1 left-padded by 3, row 2 right-padded by 2 (pads hold token 0)",
    "position_ids": "cumsum(attention_mask)-1 clamped at 0, passed to forward() explicitly",
    "logits": "<Arch>ForCausalLM(input_ids, attention_mask, position_ids).logits, eager attention, float32; "
              "compare only rows where valid_query[b,t]==1 (padded query rows are garbage in HF)",
    "logp": "logp[b,t] = log_softmax(logits[b,t])[input_ids[b,t+1]], t < T-1",
    "loss": "-sum_{b,t} adv[b]*logp[b,t]*valid[b,t] / B, valid[b,t] = mask[b,t]*mask[b,t+1]",
    "grads": "grad.<param> = dloss/dparam in float32 for every model.named_parameters() entry "
             "(a tied head is listed once, under the embedding, with both uses summed)",
    "greedy": "greedy.new_tokens = generate(do_sample=False) of the left-padded greedy.prompt_ids, "
              "KV cache, no EOS stop; greedy_min_gap is the smallest top1-top2 logit gap seen",
    "fp32_noise": "max |fp32 - fp64| / max |fp64| of the reference itself, per tensor (grads: the worst)",
    "sensitivity": "max |logit change| over valid queries when a tensor is neutralised (norm weight 1, bias 0) or "
                   "shifted by one row (matrices), or a known bug is injected; each must exceed min_required "
                   "= 10 x the test's logit tolerance (1e-5 x max |valid logit|)",
}


def make(name: str, cls, make_config, seed: int) -> dict:
    model = build(cls, make_config, seed)
    folder = OUT / name
    model.save_pretrained(folder)
    gen = torch.Generator().manual_seed(seed)
    ids, mask = padded_batch(gen)
    adv = torch.tensor(ADV)
    ref, valid = reference(model, ids, mask, adv)
    greedy_t, gap = greedy(model, gen)
    noise = fp32_noise(model, ids, mask, adv, ref)
    sens = sensitivity(model, ids, mask)
    tensors = {"input_ids": ids, "attention_mask": mask, "adv": adv, "position_ids": positions_from_mask(mask),
               "valid_query": mask, "valid": valid, **ref, **greedy_t}
    tensors = {k: (v.to(torch.int32) if k.split(".")[-1] in INT_NAMES else v.to(torch.float32)).contiguous()
               for k, v in tensors.items()}
    # One metadata key only: safetensors writes the metadata map in hash order.
    save_file(tensors, OUT / f"{name}.fixture.safetensors", metadata={"format": "pt"})
    describe = {k: {"dtype": "I32" if v.dtype == torch.int32 else "F32", "shape": list(v.shape)} for k, v in tensors.items()}
    notes = {"model": f"test/fixtures/transformers/{name}", "architecture": cls.__name__,
             "versions": {"torch": torch.__version__.split("+")[0], "transformers": transformers.__version__},
             **NOTES, "greedy_min_gap": round(gap, 6), "fp32_noise": noise, "sensitivity": sens, "tensors": describe}
    (OUT / f"{name}.fixture.json").write_text(json.dumps(notes, indent=2) + "\n")
    weakest = min((kv for kv in sens.items() if kv[0] != "min_required"), key=lambda kv: kv[1])
    return {"gap": round(gap, 4), "fp32_noise": noise, "weakest": weakest, "min_required": sens["min_required"]}


def main():
    torch.set_num_threads(1)  # fixed reduction order
    transformers.logging.set_verbosity_error()
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    for seed, (name, (cls, make_config)) in enumerate(MODELS.items(), start=11):
        print(name, make(name, cls, make_config, seed))
    total = sum(f.stat().st_size for f in OUT.rglob("*") if f.is_file())
    print(f"wrote {OUT.relative_to(ROOT)}: {total / 1024:.0f} KiB")
    assert total < 1536 * 1024, "keep these fixtures under 1.5 MiB"


if __name__ == "__main__":
    main()
