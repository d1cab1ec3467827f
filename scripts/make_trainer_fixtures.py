"""End-to-end reference numerics for the MAGRPO trainer (llm.c test_gpt2 style), in PyTorch float64.

Run:  /usr/bin/python3 scripts/make_trainer_fixtures.py [case ...]   (torch >= 1.13, numpy; CPU)
      (named cases only: a newer torch samples other rollouts, so regenerate only what changed)

For each case below it samples a rollout from models/micro (prompt ids, completion ids, sampling
log-probs, joint rewards; several items, one or two turns), then recomputes what one run of the
trainer on that rollout must do, independently of the TS code:
returns (R = r + γ·mean child R), per-agent credit (aligned, cross mean/sum), reference-KL shaping,
advantages (mean/raw/max/rloo, normalised or not), per-sample losses (sequence_sum, token_mean,
constant_norm; PPO clipping; KL loss term), the buffer/drain schedule, gradients, gradient clipping,
the LR schedule and AdamW (torch.optim.AdamW). It writes test/fixtures/trainer/<case>.json:
the config, the rollout, and the expected per-drain metrics and per-parameter summaries of the
updated weights and AdamW moments. test/rl/trainer-pytorch.test.ts replays the rollout through the
trainer and compares. Regenerating needs PyTorch; running the test does not.

The Llama forward here is written from the HF definition (eager attention, RMSNorm, RoPE with
HF's float32 inverse frequencies and angles), all in float64; it shares no code with magrpo.

Summaries keep the fixtures small: a tensor with <= 64 entries is stored whole; a larger one as its
sum of squares, a projection sum_j x_j * h(j) with h(j) = ((j * 2654435761) mod 2^32) / 2^32 - 0.5,
and 8 entries (4 of the largest |m| and 4 at seeded random indices).
"""

import hashlib
import json
import math
import struct
import sys
from pathlib import Path

import numpy as np
import torch

torch.set_default_dtype(torch.float64)
ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "models" / "micro"
OUT = ROOT / "test" / "fixtures" / "trainer"
EOS = 1

# Every case is a complete trainer config (keys of MagrpoConfig) plus rollout-shape settings.
# Buffers are sized so each turn group of a drain is one minibatch: the trainer's shuffle then
# only reorders a sum, and the numbers do not depend on its RNG.
COMMON = dict(num_train_epochs=1, eval_interval=0, logging_steps=1, early_termination_threshold=None,
              external_prompt_passthrough=True, weight_decay=0.01, adam_betas=[0.9, 0.999], adam_eps=1e-8)
CASES = {
    # minibatch of 2 node samples (two items' roots) in one optimizer step
    "aligned_mb2": dict(num_agents=2, num_generations=3, num_turns=1, max_new_tokens=6, items=2,
                        rollout_buffer_size=2, advantage_mode="mean", advantage_normalization=True,
                        loss_aggregation="sequence_sum", agent_learning_rate=1e-3),
    # two turns: one drain with a turn-1 step after the turn-0 step; discount, reward processor,
    # linear LR schedule over the run's 2 steps, gradient clipping
    "aligned_two_turns": dict(num_agents=2, num_generations=2, num_turns=2, max_new_tokens=5, items=1,
                              rollout_buffer_size=3, advantage_mode="raw", advantage_normalization=False,
                              loss_aggregation="token_mean", agent_learning_rate=2e-3, discount=0.9,
                              reward_processor=dict(scale=2.0, shift=-0.5, clamp_min=None, clamp_max=None),
                              lr_scheduler="linear", max_grad_norm=0.5),
    # G^N joint actions per node, mean credit; two items, one drain each
    "cross_rloo": dict(num_agents=2, num_generations=2, num_turns=1, max_new_tokens=5, items=2,
                       rollout_buffer_size=1, joint_mode="cross", cross_credit="mean", advantage_mode="rloo",
                       advantage_normalization=False, loss_aggregation="constant_norm", agent_learning_rate=1e-3),
    # cross and two turns: 1 + 4 nodes per agent, sum credit (the reference's)
    "cross_two_turns": dict(num_agents=2, num_generations=2, num_turns=2, max_new_tokens=4, items=1,
                            rollout_buffer_size=5, joint_mode="cross", cross_credit="sum", advantage_mode="max",
                            advantage_normalization=True, loss_aggregation="sequence_sum", agent_learning_rate=1e-3),
    # GRPO (N = 1), PPO clipping over 2 passes and the KL loss term: the second pass runs with a
    # moved policy, so ratios leave [1-ε, 1+ε] and the KL term has a gradient
    "ppo_kl_loss": dict(num_agents=1, num_generations=4, num_turns=1, max_new_tokens=6, items=1,
                        rollout_buffer_size=1, advantage_mode="mean", advantage_normalization=True,
                        loss_aggregation="sequence_sum", agent_learning_rate=4e-3, ppo_clip_eps=0.2, ppo_epochs=2,
                        reference_kl_enabled=True, reference_kl_mode="loss", reference_kl_coef=0.3),
    # LoRA adapters (B != 0, as mid-run, so the policy differs from the frozen base = reference)
    # with KL reward shaping
    "lora_kl_shaping": dict(num_agents=2, num_generations=3, num_turns=1, max_new_tokens=5, items=1,
                            rollout_buffer_size=1, advantage_mode="mean", advantage_normalization=False,
                            loss_aggregation="sequence_sum", agent_learning_rate=5e-3,
                            lora=dict(r=2, alpha=4.0, target_modules=["q_proj", "v_proj", "down_proj"]),
                            reference_kl_enabled=True, reference_kl_mode="reward_shaping", reference_kl_coef=0.2),
}
ROLLOUT_KEYS = ("items",)

# Centralized MAGRPO (src/rl/algorithms/centralized.ts): one policy writes the joint completion of
# every role; its update is GRPO's on those completions, so run_case computes it with N = 1. The
# replay's adapter passes the prompt label through and gives the completion label to every role.
CENTRALIZED_CASES = {
    "centralized_two_roles": dict(algorithm="centralized_magrpo", num_roles=2, num_agents=1, num_generations=4,
                                  num_turns=1, max_new_tokens=6, items=2, rollout_buffer_size=1,
                                  advantage_mode="rloo", advantage_normalization=False,
                                  loss_aggregation="token_mean", agent_learning_rate=3e-3),
}

# MADPO (src/rl/algorithms/madpo.ts): candidates sampled once per item, pairs by reward, then
# epochs of joint-factorized DPO steps. One batch holds every pair, so the trainer's shuffle only
# reorders a mean; the second epoch steps from moved policies, so each agent's own Δ and the
# others' detached Δ both change between steps.
MADPO_CASES = {
    # the 3 largest-gap pairs of 4 candidates per item, two items, two agents, DPO's loss
    "madpo_reward_gap": dict(algorithm="madpo", num_agents=2, preference_num_candidates=4, preference_pairs_per_sample=3,
                             pair_selection="reward_gap", dpo_beta=0.5, max_new_tokens=5, items=2, num_train_epochs=2,
                             train_batch_size=6, agent_learning_rate=2e-3),
    # every pair of 3 candidates, three agents, reference-free (the reference library's loss)
    "madpo_all_reference_free": dict(algorithm="madpo", num_agents=3, preference_num_candidates=3,
                                     preference_pairs_per_sample=None, pair_selection="all", reference_free=True,
                                     dpo_beta=0.2, max_new_tokens=4, items=1, num_train_epochs=2, train_batch_size=3,
                                     agent_learning_rate=3e-3),
}

# IAC (src/rl/algorithms/iac.ts): each agent's actor with a value head on its own model. The
# head starts random (value_head_init) so values, targets and advantages are not all zero. One
# drain per run, after every item is sampled, so every V_old comes from the starting weights;
# each turn group is one minibatch. In the two-turn case the second step reads values moved by
# the first, so the value clip binds there.
IAC_CASES = {
    # two turns, G = 1: TD targets r + γ·V_old(next turn), advantages z-scored per turn group,
    # clipped value loss, V(h) on the prompt
    "iac_two_turns_v": dict(algorithm="iac", num_agents=2, num_generations=1, num_turns=2, max_new_tokens=4, items=3,
                            rollout_buffer_size=6, critic_type="v", value_clip_range=0.05, value_loss_coef=0.6,
                            discount=0.9, advantage_normalization=True, agent_learning_rate=3e-3),
    # one turn, G = 3 aligned: Q(h, a) on prompt + completion, plain squared value error, raw advantages
    "iac_q_single_turn": dict(algorithm="iac", num_agents=2, num_generations=3, num_turns=1, max_new_tokens=5, items=2,
                              rollout_buffer_size=6, critic_type="q", value_clip_range=None, value_loss_coef=0.5,
                              advantage_normalization=False, agent_learning_rate=2e-3),
}


# ---------------------------------------------------------------------------------------------
# Checkpoint and model.

def read_safetensors(path: Path) -> dict:
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", f"{path}: {name} is {info['dtype']}"
        a, b = info["data_offsets"]
        arr = np.frombuffer(raw[8 + n + a:8 + n + b], dtype="<f4").reshape(info["shape"])
        out[name] = torch.tensor(arr.astype(np.float64))
    return out


def rope_tables(head_dim, max_pos, theta):
    """HF: inverse frequencies and angles in float32, then cos/sin (here in float64)."""
    half = head_dim // 2
    inv = np.array([np.float32(1.0 / theta ** (2 * i / head_dim)) for i in range(half)], dtype=np.float32)
    angle = (np.arange(max_pos, dtype=np.float32)[:, None] * inv[None, :]).astype(np.float64)
    emb = np.concatenate([angle, angle], axis=1)
    return torch.tensor(np.cos(emb)), torch.tensor(np.sin(emb))


class Llama:
    """HF LlamaForCausalLM forward for one unpadded sequence, float64, optional LoRA adapters."""

    def __init__(self, cfg, weights):
        self.cfg, self.w = cfg, weights
        self.lora = {}  # projection name -> (A, B, scale)
        self.hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
        self.cos, self.sin = rope_tables(self.hd, cfg["max_position_embeddings"], cfg["rope_theta"])

    def proj(self, x, name):
        y = x @ self.w[name + ".weight"].T
        if name in self.lora:
            a, b, scale = self.lora[name]
            y = y + scale * ((x @ a.T) @ b.T)
        return y

    def logits(self, ids):
        w = self.w
        head = w["model.embed_tokens.weight"] if self.cfg["tie_word_embeddings"] else w["lm_head.weight"]
        return self.hidden(ids) @ head.T

    def hidden(self, ids):
        """The final hidden states [T, C], after the final norm (what the LM head and a value head read)."""
        cfg, w = self.cfg, self.w
        t = len(ids)
        nh, nkv, hd, eps = cfg["num_attention_heads"], cfg["num_key_value_heads"], self.hd, cfg["rms_norm_eps"]
        norm = lambda x, g: g * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        rot = lambda x: torch.cat((-x[..., hd // 2:], x[..., :hd // 2]), -1)
        cos, sin = self.cos[:t, None, :], self.sin[:t, None, :]  # [T,1,D]
        x = w["model.embed_tokens.weight"][torch.tensor(ids)]
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        for i in range(cfg["num_hidden_layers"]):
            p = f"model.layers.{i}."
            h = norm(x, w[p + "input_layernorm.weight"])
            q = self.proj(h, p + "self_attn.q_proj").view(t, nh, hd)
            k = self.proj(h, p + "self_attn.k_proj").view(t, nkv, hd)
            v = self.proj(h, p + "self_attn.v_proj").view(t, nkv, hd)
            q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
            k, v = k.repeat_interleave(nh // nkv, 1), v.repeat_interleave(nh // nkv, 1)
            s = torch.einsum("qhd,khd->hqk", q, k) * hd ** -0.5
            s = s.masked_fill(~causal, float("-inf"))
            o = torch.einsum("hqk,khd->qhd", torch.softmax(s, -1), v).reshape(t, nh * hd)
            x = x + self.proj(o, p + "self_attn.o_proj")
            h = norm(x, w[p + "post_attention_layernorm.weight"])
            m = torch.nn.functional.silu(self.proj(h, p + "mlp.gate_proj")) * self.proj(h, p + "mlp.up_proj")
            x = x + self.proj(m, p + "mlp.down_proj")
        return norm(x, w["model.norm.weight"])

    def completion_logprobs(self, prompt, completion):
        """Per completion token: log π(c_j | prompt, c_<j) [len], and the entropy of each predictive row."""
        logits = self.logits(prompt + completion)[len(prompt) - 1:len(prompt) - 1 + len(completion)]
        lsm = torch.log_softmax(logits, -1)
        lp = lsm.gather(-1, torch.tensor(completion)[:, None])[:, 0]
        ent = -(lsm.exp() * lsm).sum(-1)
        return lp, ent.detach()


# ---------------------------------------------------------------------------------------------
# Rollout: sampled from the policy, recorded as the trainer would see it.

def joint_indices(mode, n, g):
    if mode in ("aligned", "align") or n == 1:
        return [[k] * n for k in range(g)]
    out = []
    for k in range(g ** n):  # itertools.product order: last agent fastest
        idx, r = [], k
        for _ in range(n):
            idx.append(r % g)
            r //= g
        out.append(idx[::-1])
    return out


def sample(policy, prompt, max_new, gen):
    """Ancestral sampling at temperature 1 until EOS or max_new; log-probs of the untempered
    distribution, as the TS sampler records them."""
    ids, lps = [], []
    with torch.no_grad():
        for _ in range(max_new):
            lsm = torch.log_softmax(policy.logits(prompt + ids)[-1], -1)
            tok = int(torch.multinomial(lsm.exp(), 1, generator=gen))
            ids.append(tok)
            lps.append(float(lsm[tok]))
            if tok == EOS:
                break
    return ids, lps


def make_rollout(case, policies, gen):
    n, g, turns, mode = case["num_agents"], case["num_generations"], case["num_turns"], case.get("joint_mode", "aligned")
    joint = joint_indices(mode, n, g)
    items = []
    for item in range(case["items"]):
        base = [0] + torch.randint(3, 4096, (4 + item,), generator=gen).tolist()
        nodes = [dict(turn=0, parent=None, parent_joint=None, prompt_ids=[base[:] for _ in range(n)])]
        level = [0]
        for turn in range(turns):
            for k in level:
                node = nodes[k]
                node["completion_ids"], node["logprobs"] = [], []
                for a in range(n):
                    done = [sample(policies[a], node["prompt_ids"][a], case["max_new_tokens"], gen) for _ in range(g)]
                    node["completion_ids"].append([d[0] for d in done])
                    node["logprobs"].append([d[1] for d in done])
                node["rewards"] = [round(float(torch.rand(1, generator=gen)), 2) for _ in joint]
            if turn + 1 == turns:
                break
            nxt = []
            for k in level:
                for j, idx in enumerate(joint):
                    feedback = torch.randint(3, 4096, (2,), generator=gen).tolist()
                    prompts = [nodes[k]["prompt_ids"][a] + nodes[k]["completion_ids"][a][idx[a]] + feedback for a in range(n)]
                    nodes.append(dict(turn=turn + 1, parent=k, parent_joint=j, prompt_ids=prompts))
                    nxt.append(len(nodes) - 1)
            level = nxt
        items.append(dict(nodes=nodes))
    return items, joint


# ---------------------------------------------------------------------------------------------
# The trainer's arithmetic, recomputed.

def children_of(nodes, k):
    return sorted((c for c, x in enumerate(nodes) if x["parent"] == k), key=lambda c: nodes[c]["parent_joint"])


def processed(r, proc):
    if proc is None:
        return r
    r = r * proc["scale"] + proc["shift"]
    if proc["clamp_min"] is not None:
        r = max(proc["clamp_min"], r)
    if proc["clamp_max"] is not None:
        r = min(proc["clamp_max"], r)
    return r


def returns_of(nodes, k, gamma, proc):
    """R^k = r^k + γ · mean(R of child k) (leaf: r^k), bottom-up; fills node['returns']."""
    node = nodes[k]
    kids = children_of(nodes, k)
    rewards = [processed(r, proc) for r in node["rewards"]]
    if kids:
        child_r = [returns_of(nodes, c, gamma, proc) for c in kids]
        node["returns"] = [r + gamma * (sum(cr) / len(cr)) for r, cr in zip(rewards, child_r)]
    else:
        node["returns"] = rewards
    return node["returns"]


def agent_returns(returns, joint, agent, g, credit):
    sums, counts = [0.0] * g, [0] * g
    for k, idx in enumerate(joint):
        sums[idx[agent]] += returns[k]
        counts[idx[agent]] += 1
    return sums if credit == "sum" else [s / c for s, c in zip(sums, counts)]


def advantages(r, mode, normalize):
    g, m = len(r), sum(r) / len(r)
    a = {"mean": [x - m for x in r], "raw": list(r), "max": [x - max(r) for x in r],
         "rloo": [(g * x - sum(r)) / (g - 1) for x in r]}[mode]
    if normalize and g > 1:
        am = sum(a) / g
        std = math.sqrt(sum((x - am) ** 2 for x in a) / g)
        a = [(x - am) / max(std, 1e-6) for x in a]
    return a


def k3(ref, pol):
    return sum(math.exp(r - p) - (r - p) - 1 for r, p in zip(ref, pol))


def preorder(nodes, k=0):
    out = [k]
    for c in children_of(nodes, k):
        out += preorder(nodes, c)
    return out


def lr_multiplier(step, kind, warmup, total):
    if step < warmup:
        return (step + 1) / warmup
    if kind == "constant":
        return 1.0
    progress = min(1.0, (step - warmup) / (total - warmup))
    return 1 - progress if kind == "linear" else 0.5 * (1 + math.cos(math.pi * progress))


def run_case(name, case, cfg, weights):
    c = {**COMMON, **{k: v for k, v in case.items() if k not in ROLLOUT_KEYS}}
    n, g, mode = c["num_agents"], c["num_generations"], c.get("joint_mode", "aligned")
    seed = 1000 + sorted(CASES).index(name) if name in CASES else 2000 + sorted(CENTRALIZED_CASES).index(name)
    gen = torch.Generator().manual_seed(seed)
    base = Llama(cfg, weights)
    policies = [Llama(cfg, {k: v.clone() for k, v in weights.items()}) for _ in range(n)]
    lora_init = None
    if c.get("lora"):
        lora_init = [attach_lora(pol, weights, c["lora"], gen) for pol in policies]
    items, joint = make_rollout(case, policies, gen)

    # Per agent: node samples in env-step order (item by item, depth-first pre-order).
    kl_cfg = c.get("reference_kl_enabled") and {"mode": c["reference_kl_mode"], "coef": c["reference_kl_coef"]}
    per_agent = [[] for _ in range(n)]
    for it in items:
        nodes = it["nodes"]
        returns_of(nodes, 0, c.get("discount", 1.0), c.get("reward_processor"))
        for k in preorder(nodes):
            node = nodes[k]
            for a in range(n):
                comps, old = node["completion_ids"][a], node["logprobs"][a]
                with torch.no_grad():
                    ref = [base.completion_logprobs(node["prompt_ids"][a], x)[0].tolist() for x in comps]
                r = agent_returns(node["returns"], joint, a, g, c.get("cross_credit", "mean"))
                if kl_cfg and kl_cfg["mode"] == "reward_shaping":
                    r = [x - kl_cfg["coef"] * k3(rf, o) for x, rf, o in zip(r, ref, old)]
                per_agent[a].append(dict(turn=node["turn"], prompt=node["prompt_ids"][a], comps=comps, old=old, ref=ref,
                                         adv=advantages(r, c["advantage_mode"], c["advantage_normalization"])))

    # Drains: buffer of rollout_buffer_size; per turn group, ppo_epochs passes of minibatches.
    mb_size = c.get("train_batch_size") or c["rollout_buffer_size"]
    drains = [[] for _ in range(n)]
    for a in range(n):
        buf = []
        for s in per_agent[a] + [None]:
            if s is not None:
                buf.append(s)
            if buf and (s is None or len(buf) >= c["rollout_buffer_size"]):
                steps = []
                for turn in sorted({x["turn"] for x in buf}):
                    group = [x for x in buf if x["turn"] == turn]
                    assert len(group) <= mb_size, f"{name}: a turn group spans minibatches; the trainer's shuffle would matter"
                    steps += [group] * c.get("ppo_epochs", 1)
                drains[a].append(steps)
                buf = []

    expected = []
    for a, pol in enumerate(policies):
        if c.get("lora"):
            params = {}
            for proj, (A, B, scale) in pol.lora.items():
                A.requires_grad_(True)
                B.requires_grad_(True)
                params[proj + ".lora_A.weight"], params[proj + ".lora_B.weight"] = A, B
        else:
            for t in pol.w.values():
                t.requires_grad_(True)
            params = dict(pol.w)
        lr = c["agent_learning_rate"]
        opt = adamw(params, lr, c)
        total = sum(len(d) for d in drains[a])
        step, logged, clipped, margin = 0, [], [0, 0], math.inf
        for steps in drains[a]:
            rec = dict(loss=0.0, grad_norm=0.0, entropy=0.0, tokens=0, seqs=0)
            for mb in steps:
                opt.zero_grad(set_to_none=False)
                mb_loss = 0.0
                for s in mb:
                    loss_s = 0.0
                    for gi, comp in enumerate(s["comps"]):
                        lp, ent = pol.completion_logprobs(s["prompt"], comp)
                        agg = {"sequence_sum": 1.0, "token_mean": 1.0 / len(comp),
                               "constant_norm": 1.0 / c["max_new_tokens"]}[c["loss_aggregation"]]
                        w = agg / len(s["comps"])
                        adv = s["adv"][gi]
                        if c.get("ppo_clip_eps"):
                            eps = c["ppo_clip_eps"]
                            ratio = torch.exp(lp - torch.tensor(s["old"][gi]))
                            term = -w * torch.minimum(ratio * adv, ratio.clamp(1 - eps, 1 + eps) * adv).sum()
                            clipped[0] += int(((ratio < 1 - eps) | (ratio > 1 + eps)).sum())
                            clipped[1] += len(comp)
                            margin = min(margin, float((ratio.detach() - (1 - eps)).abs().min()), float((ratio.detach() - (1 + eps)).abs().min()))
                        else:
                            term = -w * adv * lp.sum()
                        if kl_cfg and kl_cfg["mode"] == "loss":
                            d = torch.tensor(s["ref"][gi]) - lp
                            term = term + kl_cfg["coef"] * w * (torch.exp(d) - d - 1).sum()
                        loss_s = loss_s + term
                        rec["entropy"] += float(ent.sum())
                        rec["tokens"] += len(comp)
                    rec["seqs"] += len(s["comps"])
                    (loss_s / len(mb)).backward()
                    mb_loss += float(loss_s) / len(mb)
                norm = math.sqrt(sum(float((p.grad ** 2).sum()) for p in params.values()))
                if c.get("max_grad_norm"):
                    coef = c["max_grad_norm"] / (norm + 1e-6)
                    if coef < 1:
                        for p in params.values():
                            p.grad.mul_(coef)
                for group in opt.param_groups:
                    group["lr"] = lr * lr_multiplier(step, c.get("lr_scheduler", "constant"), c.get("warmup_steps", 0), total)
                opt.step()
                step += 1
                rec["loss"] += mb_loss
                rec["grad_norm"] += norm
            k = len(steps)
            logged.append({"loss": rec["loss"] / k, "grad_norm": rec["grad_norm"] / k, "entropy": rec["entropy"] / rec["tokens"],
                           "completion_length": rec["tokens"] / rec["seqs"], "lr": opt.param_groups[0]["lr"], "steps": k})
        params_out = summaries(params, opt, gen)
        # float32 runs of the test must clip the same tokens: no ratio may sit near a clip boundary
        assert margin > 1e-4, f"{name}: a PPO ratio is {margin} from a clip boundary; change the case"
        expected.append(dict(drains=logged, optimizer_steps=step, params=params_out,
                             ppo_clipped_fraction=clipped[0] / clipped[1] if clipped[1] else None))
        if clipped[1]:
            print(f"{name}: agent {a}: closest PPO ratio to a clip boundary: {margin:.2e}")
    # The rollout as the trainer receives it (what samples.jsonl records, minus texts).
    rollout = [dict(nodes=[{k: v for k, v in nd.items() if k != "returns"} for nd in it["nodes"]]) for it in items]
    return c, rollout, lora_init, expected


def madpo_pairs(rewards, mode, limit):
    """Ordered (w, l) with r_w > r_l; reward_gap: largest gap first (stable), all: as enumerated."""
    cand = [(rewards[w] - rewards[l], w, l) for w in range(len(rewards)) for l in range(len(rewards))
            if w != l and rewards[w] - rewards[l] > 0]
    assert mode in ("reward_gap", "all"), "random selection depends on the trainer's RNG"
    if mode == "reward_gap":
        cand.sort(key=lambda x: -x[0])
    if mode != "all" and limit is not None:
        cand = cand[:limit]
    return [(w, l) for _, w, l in cand]


def run_madpo_case(name, case, cfg, weights):
    c = {**COMMON, **{k: v for k, v in case.items() if k not in ROLLOUT_KEYS}}
    n, C, beta = c["num_agents"], c["preference_num_candidates"], c["dpo_beta"]
    c["num_generations"] = C  # what the trainer derives; the replay reads it
    gen = torch.Generator().manual_seed(3000 + sorted(MADPO_CASES).index(name))
    base = Llama(cfg, weights)
    policies = [Llama(cfg, {k: v.clone() for k, v in weights.items()}) for _ in range(n)]
    items, _ = make_rollout({**case, "num_generations": C, "num_turns": 1}, policies, gen)

    # Pairs of every item, in item order; Δ_ref from the frozen starting model.
    pairs = []
    for it in items:
        node = it["nodes"][0]
        chosen = madpo_pairs(node["rewards"], c["pair_selection"], c["preference_pairs_per_sample"])
        full = C * (C - 1) // 2
        assert len(chosen) == (full if c["preference_pairs_per_sample"] is None else min(full, c["preference_pairs_per_sample"])), \
            f"{name}: tied rewards {node['rewards']}; change the case"
        for w, l in chosen:
            ref = 0.0
            if not c.get("reference_free"):
                with torch.no_grad():
                    for a in range(n):
                        p, comps = node["prompt_ids"][a], node["completion_ids"][a]
                        ref += float(base.completion_logprobs(p, comps[w])[0].sum() - base.completion_logprobs(p, comps[l])[0].sum())
            pairs.append(dict(prompts=node["prompt_ids"], w=[node["completion_ids"][a][w] for a in range(n)],
                              l=[node["completion_ids"][a][l] for a in range(n)], ref=ref))
    assert c["train_batch_size"] >= len(pairs), f"{name}: one batch per epoch keeps the shuffle out of the numbers"

    for pol in policies:
        for t in pol.w.values():
            t.requires_grad_(True)
    opts = [adamw(pol.w, c["agent_learning_rate"], c) for pol in policies]
    logged = [[] for _ in range(n)]
    for _ in range(c["num_train_epochs"]):
        # every agent's Δ on every pair with the current weights, before any agent steps
        with torch.no_grad():
            delta = [[float(policies[a].completion_logprobs(p["prompts"][a], p["w"][a])[0].sum()
                            - policies[a].completion_logprobs(p["prompts"][a], p["l"][a])[0].sum()) for p in pairs]
                     for a in range(n)]
        for a, (pol, opt) in enumerate(zip(policies, opts)):
            opt.zero_grad(set_to_none=False)
            losses, ent, tokens = [], 0.0, 0
            for b, p in enumerate(pairs):
                lw, ew = pol.completion_logprobs(p["prompts"][a], p["w"][a])
                ll, el = pol.completion_logprobs(p["prompts"][a], p["l"][a])
                others = sum(delta[j][b] for j in range(n) if j != a)
                losses.append(-torch.nn.functional.logsigmoid(beta * (lw.sum() - ll.sum() + others - p["ref"])))
                ent += float(ew.sum() + el.sum())
                tokens += len(p["w"][a]) + len(p["l"][a])
            loss = torch.stack(losses).mean()
            loss.backward()
            norm = math.sqrt(sum(float((t.grad ** 2).sum()) for t in pol.w.values()))
            opt.step()
            logged[a].append({"loss": float(loss.detach()), "grad_norm": norm, "entropy": ent / tokens,
                              "completion_length": tokens / (2 * len(pairs)), "lr": c["agent_learning_rate"], "steps": 1})
    expected = []
    for a, (pol, opt) in enumerate(zip(policies, opts)):
        expected.append(dict(drains=logged[a], optimizer_steps=len(logged[a]), params=summaries(pol.w, opt, gen), ppo_clipped_fraction=None))
    rollout = [dict(nodes=[{k: v for k, v in nd.items() if k != "returns"} for nd in it["nodes"]]) for it in items]
    return c, rollout, None, expected


def run_iac_case(name, case, cfg, weights):
    c = {**COMMON, **{k: v for k, v in case.items() if k not in ROLLOUT_KEYS}}
    n, g = c["num_agents"], c["num_generations"]
    gen = torch.Generator().manual_seed(4000 + sorted(IAC_CASES).index(name))
    policies = [Llama(cfg, {k: v.clone() for k, v in weights.items()}) for _ in range(n)]
    C = cfg["hidden_size"]
    heads = [dict(w=torch.randn(1, C, generator=gen) * 0.1, b=torch.randn(1, generator=gen) * 0.1) for _ in range(n)]
    items, joint = make_rollout(case, policies, gen)

    def value(pol, head, ids):
        return (pol.hidden(ids)[-1:] @ head["w"].T + head["b"]).reshape(1)

    def critic_ids(prompt, comp):
        return prompt if c["critic_type"] == "v" else prompt + comp

    # V_old of every completion with the starting weights (everything is sampled before the one drain)
    with torch.no_grad():
        for it in items:
            for node in it["nodes"]:
                node["values"] = [[float(value(policies[a], heads[a], critic_ids(node["prompt_ids"][a], x)))
                                   for x in node["completion_ids"][a]] for a in range(n)]
    per_agent = [[] for _ in range(n)]
    for it in items:
        nodes = it["nodes"]
        for k in preorder(nodes):
            node, kids = nodes[k], children_of(nodes, k)
            for a in range(n):
                for gi, comp in enumerate(node["completion_ids"][a]):
                    j = next(j for j, idx in enumerate(joint) if idx[a] == gi)
                    r = processed(node["rewards"][j], c.get("reward_processor"))
                    target = r + c.get("discount", 1.0) * nodes[kids[j]]["values"][a][0] if kids else r
                    v_old = node["values"][a][gi]
                    per_agent[a].append(dict(turn=node["turn"], prompt=node["prompt_ids"][a], comp=comp, v_old=v_old,
                                             target=target, adv=target - v_old))
    for a in range(n):
        assert len(per_agent[a]) == c["rollout_buffer_size"], f"{name}: one drain after the last item"

    expected, margin = [], math.inf
    for a, pol in enumerate(policies):
        head = heads[a]
        for t in pol.w.values():
            t.requires_grad_(True)
        params = {**pol.w, "v_head.summary.weight": head["w"].clone().requires_grad_(True),
                  "v_head.summary.bias": head["b"].clone().requires_grad_(True)}
        head = {"w": params["v_head.summary.weight"], "b": params["v_head.summary.bias"]}
        opt = adamw(params, c["agent_learning_rate"], c)
        rec = dict(loss=0.0, grad_norm=0.0, entropy=0.0, tokens=0, seqs=0, value_loss=0.0)
        steps = 0
        eps = c["value_clip_range"]
        for turn in sorted({x["turn"] for x in per_agent[a]}):
            group = [x for x in per_agent[a] if x["turn"] == turn]
            advs = [x["adv"] for x in group]
            if c["advantage_normalization"] and len(advs) > 1:
                m = sum(advs) / len(advs)
                std = max(math.sqrt(sum((x - m) ** 2 for x in advs) / len(advs)), 1e-6)
                advs = [(x - m) / std for x in advs]
            opt.zero_grad(set_to_none=False)
            mb_loss = 0.0
            for x, adv in zip(group, advs):
                lp, ent = pol.completion_logprobs(x["prompt"], x["comp"])
                v = value(pol, head, critic_ids(x["prompt"], x["comp"]))
                err = (x["target"] - v) ** 2
                if eps is not None:
                    clipped = x["v_old"] + torch.clamp(v - x["v_old"], -eps, eps)
                    err = torch.maximum(err, (x["target"] - clipped) ** 2)
                    margin = min(margin, abs(abs(float(v) - x["v_old"]) - eps))
                loss_s = -adv * lp.sum() + c["value_loss_coef"] * err.sum()
                (loss_s / len(group)).backward()
                mb_loss += float(loss_s) / len(group)
                rec["value_loss"] += float(err.sum()) / len(group)
                rec["entropy"] += float(ent.sum())
                rec["tokens"] += len(x["comp"])
                rec["seqs"] += 1
            rec["grad_norm"] += math.sqrt(sum(float((p.grad ** 2).sum()) for p in params.values()))
            opt.step()
            rec["loss"] += mb_loss
            steps += 1
        logged = [{"loss": rec["loss"] / steps, "grad_norm": rec["grad_norm"] / steps, "entropy": rec["entropy"] / rec["tokens"],
                   "completion_length": rec["tokens"] / rec["seqs"], "lr": c["agent_learning_rate"], "steps": steps,
                   "value_loss": rec["value_loss"] / steps}]
        expected.append(dict(drains=logged, optimizer_steps=steps, params=summaries(params, opt, gen), ppo_clipped_fraction=None))
    # float32 runs of the test must take the same branch of the value clip
    assert margin > 1e-4, f"{name}: a value is {margin} from the clip boundary; change the case"
    if eps is not None:
        print(f"{name}: closest |V - V_old| to the value clip: {margin:.2e}")
    rollout = [dict(nodes=[{k: v for k, v in nd.items() if k not in ("returns", "values")} for nd in it["nodes"]]) for it in items]
    init = [{"v_head.summary.weight": h_["w"].flatten().tolist(), "v_head.summary.bias": h_["b"].tolist()} for h_ in heads]
    return c, rollout, init, expected


def h(j):
    return ((j * 2654435761) % 4294967296) / 4294967296 - 0.5


def summarize(x, m, gen):
    x = x.tolist()
    if len(x) <= 64:
        return {"full": x}
    order = sorted(range(len(x)), key=lambda j: -abs(float(m[j])))[:4]
    picks = sorted(set(order + torch.randint(0, len(x), (4,), generator=gen).tolist()))
    return {"n": len(x), "sumsq": sum(v * v for v in x), "proj": sum(v * h(j) for j, v in enumerate(x)),
            "at": [[j, x[j]] for j in picks]}


def summaries(params, opt, gen):
    """summarize() of every parameter (by name, in the optimizer's order) and of its AdamW moments."""
    state = opt.state_dict()["state"]
    return {name: {kind: summarize(x.detach().flatten(), state[i]["exp_avg"].flatten(), gen)
                   for kind, x in (("w", p), ("m", state[i]["exp_avg"]), ("v", state[i]["exp_avg_sq"]))}
            for i, (name, p) in enumerate(params.items())}


def adamw(params, lr, c):
    """torch.optim.AdamW over a dict of parameters, with the case's betas, eps and weight decay."""
    return torch.optim.AdamW(list(params.values()), lr=lr, betas=tuple(c["adam_betas"]), eps=c["adam_eps"], weight_decay=c["weight_decay"])


def attach_lora(model, weights, lo, gen):
    """Adapters on the target projections (A, B both random, as mid-run); returns them by TRL/PEFT name."""
    init = {}
    for key, w in sorted(weights.items()):
        proj = key[:-len(".weight")]
        if w.dim() != 2 or "embed_tokens" in key or proj.split(".")[-1] not in lo["target_modules"]:
            continue
        out_dim, in_dim = w.shape
        a = (torch.rand(lo["r"], in_dim, generator=gen) * 2 - 1) / math.sqrt(in_dim)
        b = torch.randn(out_dim, lo["r"], generator=gen) * 0.05
        model.lora[proj] = (a, b, lo["alpha"] / lo["r"])
        init[proj + ".lora_A.weight"] = a.flatten().tolist()
        init[proj + ".lora_B.weight"] = b.flatten().tolist()
    return init


def load_micro():
    """models/micro's config, its weights in float64, and the SHA-256 of its safetensors (each fixture records it)."""
    cfg = json.loads((MODEL / "config.json").read_text())
    weights = read_safetensors(MODEL / "model.safetensors")
    return cfg, weights, hashlib.sha256((MODEL / "model.safetensors").read_bytes()).hexdigest()


def select_cases(argv, cases):
    """The cases named in argv (every one when none), refusing unknown names; seeds torch and pins one thread."""
    only = set(argv)
    unknown = only - set(cases)
    assert not unknown, f"unknown cases {sorted(unknown)}; cases: {list(cases)}"
    torch.manual_seed(0)
    torch.set_num_threads(1)
    return [name for name in cases if not only or name in only]


def main():
    """Writes every case's fixture, or only the cases named on the command line."""
    every = sorted(CASES) + sorted(CENTRALIZED_CASES) + sorted(MADPO_CASES) + sorted(IAC_CASES)
    chosen = set(select_cases(sys.argv[1:], every))
    cfg, weights, digest = load_micro()
    OUT.mkdir(parents=True, exist_ok=True)
    runs = ([(name, run_case, CASES) for name in sorted(CASES)]
            + [(name, run_case, CENTRALIZED_CASES) for name in sorted(CENTRALIZED_CASES)]
            + [(name, run_madpo_case, MADPO_CASES) for name in sorted(MADPO_CASES)]
            + [(name, run_iac_case, IAC_CASES) for name in sorted(IAC_CASES)])
    for name, run, cases in runs:
        if name not in chosen:
            continue
        config, rollout, init, expected = run(name, cases[name], cfg, weights)
        lora_init, head_init = (None, init) if run is run_iac_case else (init, None)
        fixture = {
            "case": name,
            "model": "models/micro",
            "model_sha256": digest,
            "generated_by": "scripts/make_trainer_fixtures.py (PyTorch %s, float64)" % torch.__version__,
            "config": config,
            "lora_init": lora_init,
            **({"value_head_init": head_init} if head_init is not None else {}),
            "rollout": rollout,
            "expected": expected,
        }
        path = OUT / f"{name}.json"
        path.write_text(json.dumps(fixture, separators=(",", ":")) + "\n")
        info = ", ".join(
            f"agent {a}: {e['optimizer_steps']} steps, loss {[round(d['loss'], 4) for d in e['drains']]}, "
            f"grad_norm {[round(d['grad_norm'], 4) for d in e['drains']]}"
            + (f", clipped {e['ppo_clipped_fraction']:.2f}" if e["ppo_clipped_fraction"] is not None else "")
            for a, e in enumerate(expected))
        print(f"{name}: {path.stat().st_size // 1024} KB; {info}")
    total = sum(p.stat().st_size for p in OUT.glob("*.json"))
    assert total < 500_000, f"fixtures are {total} bytes; keep them small"
    print(f"total {total // 1024} KB")


if __name__ == "__main__":
    main()
