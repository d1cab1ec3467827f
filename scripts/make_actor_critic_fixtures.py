"""Reference numerics for critic models apart from the actors, in PyTorch float64: MAAC's shared
critic over joint prompts and IAC's separate critic per agent, with reference-model KL.

Run:  .cache/venv-learner/bin/python scripts/make_actor_critic_fixtures.py [case ...]
      (torch, numpy, transformers for the tokenizer; CPU)

Shares the float64 Llama forward, the rollout sampler and the summaries with
scripts/make_trainer_fixtures.py (HF's definition, no magrpo code). For each case it samples a
rollout from models/micro, values it with a critic (a copy of models/micro, LoRA adapters of its
own under `lora`, and a random value head), recomputes the samples (joint prompt text as CoMLRL's
MAACTrainer._build_critic_input, tokenized by HF's tokenizer; TD(0) targets; reward-shaping KL
r - beta*KL_i with the k3 sum; advantages z-scored per turn group), then the actor steps
(policy term, plus beta*sum_t k3_t in KL loss mode) and the critic steps (value_loss_coef times the
mean squared error, clipped for IAC; the shared critic on the mean of the agents' targets, once per
minibatch of joint actions). Writes test/fixtures/actor-critic/<case>.json, replayed by
test/rl/actor-critic-pytorch.test.ts.
"""

import json
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_trainer_fixtures as T  # noqa: E402  (sets float64 as torch's default dtype)

OUT = T.ROOT / "test" / "fixtures" / "actor-critic"

# One drain per run (every V_old from the starting critic); each turn group is one minibatch, so
# the trainer's shuffle only reorders a sum.
CASES = {
    # two turns, G = 1: the joint V(h) critic, TD targets r + gamma*V_old(next joint prompt),
    # advantages z-scored per turn group; two critic steps (one per turn group)
    "maac_two_turns_v": dict(algorithm="maac", num_agents=2, num_generations=1, num_turns=2, max_new_tokens=4, items=3,
                             rollout_buffer_size=6, critic_type="v", value_loss_coef=0.6, discount=0.9,
                             advantage_normalization=True, agent_learning_rate=3e-3, critic_learning_rate=2e-3),
    # one turn, G = 3: Q(h, a) on the joint prompt + joint action, LoRA actors and critic, reward-shaping
    # KL (the shared critic's target is the mean of the agents' shaped rewards), raw advantages
    "maac_q_kl_lora": dict(algorithm="maac", num_agents=2, num_generations=3, num_turns=1, max_new_tokens=5, items=2,
                           rollout_buffer_size=6, critic_type="q", value_loss_coef=0.5, advantage_normalization=False,
                           agent_learning_rate=4e-3, critic_learning_rate=3e-3,
                           lora=dict(r=2, alpha=4.0, target_modules=["q_proj", "v_proj", "down_proj"]),
                           reference_kl_enabled=True, reference_kl_mode="reward_shaping", reference_kl_coef=0.2),
    # IAC with a separate critic per agent: V(h) of the agent's own prompt, clipped value loss, LoRA,
    # and the KL as a loss term on the actor
    "iac_separate_kl_loss": dict(algorithm="iac", use_separate_critic=True, num_agents=2, num_generations=2, num_turns=1,
                                 max_new_tokens=5, items=2, rollout_buffer_size=4, critic_type="v", value_clip_range=0.05,
                                 value_loss_coef=0.7, advantage_normalization=True, agent_learning_rate=4e-3,
                                 critic_learning_rate=5e-3, lora=dict(r=2, alpha=4.0, target_modules=["q_proj", "v_proj"]),
                                 reference_kl_enabled=True, reference_kl_mode="loss", reference_kl_coef=0.3),
}


def trainable(model, head, lora):
    """The parameters an optimizer updates, by name (LoRA factors or every weight), plus a head's."""
    if lora:
        params = {}
        for proj, (A, B, _) in model.lora.items():
            params[proj + ".lora_A.weight"], params[proj + ".lora_B.weight"] = A.requires_grad_(True), B.requires_grad_(True)
    else:
        params = {k: v.requires_grad_(True) for k, v in model.w.items()}
    if head is not None:
        params["v_head.summary.weight"] = head["w"].requires_grad_(True)
        params["v_head.summary.bias"] = head["b"].requires_grad_(True)
    return params


def joint_text(prompts, actions):
    base = "\n\n".join(f"[Agent {i}] {p}" for i, p in enumerate(prompts))
    if actions is None:
        return base
    return base + "\n\n" + "\n\n".join(["[Joint Action]"] + [f"[Agent {i} action]\n{a}" for i, a in enumerate(actions)])


def run(name, case, cfg, weights, tok):
    c = {**T.COMMON, **{k: v for k, v in case.items() if k not in T.ROLLOUT_KEYS}}
    n, g, shared = c["num_agents"], c["num_generations"], c["algorithm"] == "maac"
    gen = torch.Generator().manual_seed(5000 + sorted(CASES).index(name))
    lo = c.get("lora")
    base = T.Llama(cfg, weights)
    policies = [T.Llama(cfg, {k: v.clone() for k, v in weights.items()}) for _ in range(n)]
    lora_init = [T.attach_lora(p, weights, lo, gen) for p in policies] if lo else None
    critics = [T.Llama(cfg, {k: v.clone() for k, v in weights.items()}) for _ in range(1 if shared else n)]
    C = cfg["hidden_size"]
    critic_init = []
    heads = []
    for cr in critics:
        init = T.attach_lora(cr, weights, lo, gen) if lo else {}
        head = dict(w=torch.randn(1, C, generator=gen) * 0.1, b=torch.randn(1, generator=gen) * 0.1)
        init.update({"v_head.summary.weight": head["w"].flatten().tolist(), "v_head.summary.bias": head["b"].tolist()})
        critic_init.append(init)
        heads.append(head)
    items, joint = T.make_rollout(case, policies, gen)

    def value(k, ids):
        return (critics[k].hidden(ids)[-1:] @ heads[k]["w"].T + heads[k]["b"]).reshape(1)

    kl = c.get("reference_kl_enabled") and c["reference_kl_mode"]
    beta = c.get("reference_kl_coef", 0.0)
    # V_old with the starting critics, the reference log-probs, and the critic inputs
    joint_ids = []
    with torch.no_grad():
        for j, it in enumerate(items):
            per_node = []
            for k, node in enumerate(it["nodes"]):
                label = f"i{j}n{k}"
                node["ref"] = [[base.completion_logprobs(node["prompt_ids"][a], x)[0].tolist() for x in node["completion_ids"][a]]
                               for a in range(n)]
                if shared:
                    texts = [joint_text([label] * n, None if c["critic_type"] == "v" else [f"{label}a{a}g{idx[a]}" for a in range(n)])
                             for idx in joint]
                    ids = [tok(t)["input_ids"] for t in texts]
                    node["critic_in"] = ids
                    node["v_joint"] = [float(value(0, x)) for x in ids]
                    per_node.append(dict(texts=texts, ids=ids))
                else:
                    node["critic_in"] = [[node["prompt_ids"][a] if c["critic_type"] == "v" else node["prompt_ids"][a] + x
                                          for x in node["completion_ids"][a]] for a in range(n)]
                    node["v_own"] = [[float(value(a, x)) for x in node["critic_in"][a]] for a in range(n)]
            joint_ids.append(per_node)

    # Samples, per agent, in env-step order: one per completion
    per_agent = [[] for _ in range(n)]
    for it in items:
        nodes = it["nodes"]
        for k in T.preorder(nodes):
            node, kids = nodes[k], T.children_of(nodes, k)
            targets = [[None] * g for _ in range(n)]
            for a in range(n):
                for gi in range(g):
                    jk = next(jj for jj, idx in enumerate(joint) if idx[a] == gi)
                    r = T.processed(node["rewards"][jk], c.get("reward_processor"))
                    if kl == "reward_shaping":
                        r -= beta * T.k3(node["ref"][a][gi], node["logprobs"][a][gi])
                    if kids:
                        child = nodes[kids[jk]]
                        r += c.get("discount", 1.0) * (child["v_joint"][0] if shared else child["v_own"][a][0])
                    targets[a][gi] = r
            for a in range(n):
                for gi, comp in enumerate(node["completion_ids"][a]):
                    jk = next(jj for jj, idx in enumerate(joint) if idx[a] == gi)
                    v_old = node["v_joint"][jk] if shared else node["v_own"][a][gi]
                    ctarget = sum(targets[b][joint[jk][b]] for b in range(n)) / n if shared else targets[a][gi]
                    per_agent[a].append(dict(turn=node["turn"], prompt=node["prompt_ids"][a], comp=comp, ref=node["ref"][a][gi],
                                             adv=targets[a][gi] - v_old, v_old=v_old, ctarget=ctarget,
                                             cin=node["critic_in"][jk] if shared else node["critic_in"][a][gi]))
    for a in range(n):
        assert len(per_agent[a]) == c["rollout_buffer_size"], f"{name}: one drain after the last item"

    def groups(samples):
        out = []
        for turn in sorted({x["turn"] for x in samples}):
            grp = [x for x in samples if x["turn"] == turn]
            advs = [x["adv"] for x in grp]
            if c["advantage_normalization"] and len(advs) > 1:
                m = sum(advs) / len(advs)
                std = max(math.sqrt(sum((x - m) ** 2 for x in advs) / len(advs)), 1e-6)
                advs = [(x - m) / std for x in advs]
            out.append([dict(x, adv=adv) for x, adv in zip(grp, advs)])
        return out

    expected = []
    for a, pol in enumerate(policies):
        params = trainable(pol, None, lo)
        opt = T.adamw(params, c["agent_learning_rate"], c)
        rec = dict(loss=0.0, grad_norm=0.0, entropy=0.0, tokens=0, seqs=0)
        steps = groups(per_agent[a])
        for mb in steps:
            opt.zero_grad(set_to_none=False)
            for x in mb:
                lp, ent = pol.completion_logprobs(x["prompt"], x["comp"])
                loss_s = -x["adv"] * lp.sum()
                if kl == "loss":
                    d = torch.tensor(x["ref"]) - lp
                    loss_s = loss_s + beta * (torch.exp(d) - d - 1).sum()
                (loss_s / len(mb)).backward()
                rec["loss"] += float(loss_s) / len(mb)
                rec["entropy"] += float(ent.sum())
                rec["tokens"] += len(x["comp"])
                rec["seqs"] += 1
            rec["grad_norm"] += math.sqrt(sum(float((p.grad ** 2).sum()) for p in params.values()))
            opt.step()
        k = len(steps)
        expected.append(dict(drains=[{"loss": rec["loss"] / k, "grad_norm": rec["grad_norm"] / k, "entropy": rec["entropy"] / rec["tokens"],
                                      "completion_length": rec["tokens"] / rec["seqs"], "lr": c["agent_learning_rate"], "steps": k}],
                             optimizer_steps=k, params=T.summaries(params, opt, gen)))

    critic_expected, margin = [], math.inf
    eps = None if shared else c.get("value_clip_range")
    for ci, cr in enumerate(critics):
        head = heads[ci]
        params = trainable(cr, head, lo)
        opt = T.adamw(params, c["critic_learning_rate"], c)
        rec = dict(value_loss=0.0, grad_norm=0.0)
        # the shared critic steps on agent 0's minibatches: every joint action once
        steps = groups(per_agent[0 if shared else ci])
        for mb in steps:
            opt.zero_grad(set_to_none=False)
            for x in mb:
                v = (cr.hidden(x["cin"])[-1:] @ head["w"].T + head["b"]).reshape(1)
                err = (x["ctarget"] - v) ** 2
                if eps is not None:
                    clipped = x["v_old"] + torch.clamp(v - x["v_old"], -eps, eps)
                    err = torch.maximum(err, (x["ctarget"] - clipped) ** 2)
                    margin = min(margin, abs(abs(float(v) - x["v_old"]) - eps))
                (c["value_loss_coef"] * err.sum() / len(mb)).backward()
                rec["value_loss"] += float(err.sum()) / len(mb)
            rec["grad_norm"] += math.sqrt(sum(float((p.grad ** 2).sum()) for p in params.values()))
            opt.step()
        k = len(steps)
        critic_expected.append(dict(drains=[{"value_loss": rec["value_loss"] / k, "grad_norm": rec["grad_norm"] / k}],
                                    optimizer_steps=k, params=T.summaries(params, opt, gen)))
    assert margin > 1e-4, f"{name}: a value is {margin} from the clip boundary; change the case"
    rollout = [dict(nodes=[{k: v for k, v in nd.items() if k in ("turn", "parent", "parent_joint", "prompt_ids", "completion_ids", "logprobs", "rewards")}
                           for nd in it["nodes"]]) for it in items]
    return dict(config=c, rollout=rollout, lora_init=lora_init, critic_init=critic_init,
                joint_inputs=joint_ids if shared else None, expected=expected, critics=critic_expected)


def main():
    from transformers import AutoTokenizer

    names = T.select_cases(sys.argv[1:], sorted(CASES))
    cfg, weights, digest = T.load_micro()
    tok = AutoTokenizer.from_pretrained(str(T.MODEL))
    OUT.mkdir(parents=True, exist_ok=True)
    for name in names:
        out = run(name, CASES[name], cfg, weights, tok)
        fixture = {"case": name, "model": "models/micro", "model_sha256": digest,
                   "generated_by": "scripts/make_actor_critic_fixtures.py (PyTorch %s, float64)" % torch.__version__, **out}
        path = OUT / f"{name}.json"
        path.write_text(json.dumps(fixture, separators=(",", ":")) + "\n")
        print(f"{name}: {path.stat().st_size // 1024} KB; actor loss {[round(e['drains'][0]['loss'], 4) for e in out['expected']]}, "
              f"critic value_loss {[round(e['drains'][0]['value_loss'], 4) for e in out['critics']]}")


if __name__ == "__main__":
    main()
