"""Reference numerics for iterative MADPO in PyTorch float64: the DPO loss on comparison pairs
formed against a comparator, with Delta_ref scored by the team as each iteration starts.

Run:  .cache/venv-learner/bin/python scripts/make_iterative_fixtures.py [case ...]   (torch, numpy; CPU)

Shares the float64 Llama forward, the sampler and the summaries with scripts/make_trainer_fixtures.py
(HF's definition, no magrpo code). Per iteration t and item, each agent of the team samples C
candidates from its current weights, then the comparator (comparator_policy current: the team, a
second draw) C more; every joint action gets a recorded reward. Candidate k of the team meets
candidate k of the comparator; the better wins, the pairs kept by the largest reward gap (as
CoMLRL's _select_policy_comparison_pairs). Then, as src/rl/iterative.ts does with replay mode
current:

    Delta_ref = sum_j (log pi_j(y_j^w) - log pi_j(y_j^l)), pi_j agent j as iteration t starts
    per epoch and agent i: L_i = -mean_pairs log sigmoid(beta * (Delta_i + sum_{j!=i} sg(Delta_j) - Delta_ref))

with the others' Delta_j from the weights before the step, one AdamW step per agent (a batch holds
every pair, so the trainer's shuffle only reorders a mean). Two iterations: the second samples
from, and takes Delta_ref from, the moved team, so Delta_ref is neither zero nor the starting
model's. After every iteration the drift probe (the first iteration's team candidates of the first
drift_probe_items items) is re-scored. Writes test/fixtures/iterative/<case>.json, replayed by
test/rl/iterative-pytorch.test.ts.
"""

import json
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_trainer_fixtures as T  # noqa: E402  (sets float64 as torch's default dtype)

OUT = T.ROOT / "test" / "fixtures" / "iterative"

CASES = {
    # two agents, two iterations, 4 candidates a side, the 3 largest-gap comparisons per item,
    # two DPO epochs per iteration (the second from moved weights: own and others' Delta change)
    "iter_madpo_ref_delta": dict(algorithm="madpo", num_agents=2, max_new_tokens=4, items=2, dpo_beta=0.5,
                                 num_train_epochs=2, train_batch_size=6, agent_learning_rate=3e-3,
                                 iterative=dict(num_iterations=2, preference_num_candidates=4, preference_pairs_per_sample=3,
                                                pair_selection="reward_gap", comparator_policy="current",
                                                preference_replay_mode="current", drift_probe_items=1)),
}
ROLLOUT_KEYS = ("items", "num_agents")


def comparison_pairs(own, other, limit):
    """(winner, loser) sides, ("current" | "comparator", k), for k with own[k] != other[k]: gap descending, stable."""
    cands = []
    for k in range(min(len(own), len(other))):
        gap = own[k] - other[k]
        if gap == 0:
            continue
        cur, cmp = ("current", k), ("comparator", k)
        cands.append((abs(gap), (cur, cmp) if gap > 0 else (cmp, cur)))
    cands.sort(key=lambda x: -x[0])
    return [wl for _, wl in cands[:limit]]


def seq_logprob(pol, prompt, comp):
    return pol.completion_logprobs(prompt, comp)[0].sum() if comp else torch.zeros(())


def run(name, case, cfg, weights):
    c = {**T.COMMON, **{k: v for k, v in case.items() if k not in ROLLOUT_KEYS}}
    n, beta, it = case["num_agents"], c["dpo_beta"], c["iterative"]
    C = it["preference_num_candidates"]
    gen = torch.Generator().manual_seed(6000 + sorted(CASES).index(name))
    policies = [T.Llama(cfg, {k: v.clone() for k, v in weights.items()}) for _ in range(n)]
    prompts = [[0] + torch.randint(3, 4096, (4 + j,), generator=gen).tolist() for j in range(case["items"])]
    params = [{k: v.requires_grad_(True) for k, v in pol.w.items()} for pol in policies]
    opts = [T.adamw(p, c["agent_learning_rate"], c) for p in params]

    # per agent and item label: the completions the sampler hands out, in call order
    record = [{f"i{j}": [] for j in range(case["items"])} for _ in range(n)]
    rewards = {}  # label of a joint action -> its reward
    logged = [[] for _ in range(n)]
    team_log = []  # per optimizer step: preference/accuracy, preference/margin
    iter_log = []
    probe, drift = None, []
    for t in range(it["num_iterations"]):
        pairs = []
        for j, p in enumerate(prompts):
            sides = {}
            for side in ("current", "comparator"):
                cand = [[None] * C for _ in range(n)]
                for a in range(n):
                    for k in range(C):
                        ids, lps = T.sample(policies[a], p, c["max_new_tokens"], gen)
                        text = f"i{j}t{t}{side[:3]}a{a}g{k}"
                        record[a][f"i{j}"].append(dict(ids=ids, logprobs=lps, text=text))
                        cand[a][k] = ids
                r = [round(float(torch.rand(1, generator=gen)), 2) for _ in range(C)]
                for k in range(C):
                    rewards["|".join(f"i{j}t{t}{side[:3]}a{a}g{k}" for a in range(n))] = r[k]
                sides[side] = (cand, r)
            (own, r_own), (other, r_other) = sides["current"], sides["comparator"]
            gaps = [abs(x - y) for x, y in zip(r_own, r_other)]
            assert 0 not in gaps and len(set(gaps)) == len(gaps), f"{name}: tied rewards or gaps {r_own} {r_other}; change the case"
            for win, lose in comparison_pairs(r_own, r_other, it["preference_pairs_per_sample"]):
                pick = lambda s: [sides[s[0]][0][a][s[1]] for a in range(n)]
                pairs.append(dict(prompt=p, w=pick(win), l=pick(lose)))
            if t == 0 and j < it["drift_probe_items"]:
                probe = (probe or []) + [own]
        iter_log.append(dict(pairs=len(pairs)))
        assert c["train_batch_size"] >= len(pairs), f"{name}: one batch per epoch keeps the shuffle out of the numbers"

        with torch.no_grad():
            if t == 0:
                probe_lp = lambda: [[float(seq_logprob(policies[a], prompts[j], x)) for j, own in enumerate(probe) for x in own[a]]
                                    for a in range(n)]
                initial = last = probe_lp()
            # Delta_ref: the team as this iteration starts
            ref = [sum(float(seq_logprob(policies[a], p["prompt"], p["w"][a]) - seq_logprob(policies[a], p["prompt"], p["l"][a]))
                       for a in range(n)) for p in pairs]
        assert all(abs(x) > 1e-3 for x in ref), f"{name}: a Delta_ref is ~0; change the case"
        for _ in range(c["num_train_epochs"]):
            with torch.no_grad():
                delta = [[float(seq_logprob(policies[a], p["prompt"], p["w"][a]) - seq_logprob(policies[a], p["prompt"], p["l"][a]))
                          for p in pairs] for a in range(n)]
            z = [beta * (sum(delta[a][b] for a in range(n)) - ref[b]) for b in range(len(pairs))]
            # min_abs_z: at each iteration's first step z is 0 up to rounding, and the accuracy rounding's call
            team_log.append({"accuracy": sum(x > 0 for x in z) / len(z), "margin": sum(z) / len(z), "min_abs_z": min(abs(x) for x in z)})
            for a, (pol, opt) in enumerate(zip(policies, opts)):
                opt.zero_grad(set_to_none=False)
                losses, ent, tokens = [], 0.0, 0
                for b, p in enumerate(pairs):
                    lw, ew = pol.completion_logprobs(p["prompt"], p["w"][a])
                    ll, el = pol.completion_logprobs(p["prompt"], p["l"][a])
                    others = sum(delta[j][b] for j in range(n) if j != a)
                    losses.append(-torch.nn.functional.logsigmoid(beta * (lw.sum() - ll.sum() + others - ref[b])))
                    ent += float(ew.sum() + el.sum())
                    tokens += len(p["w"][a]) + len(p["l"][a])
                loss = torch.stack(losses).mean()
                loss.backward()
                norm = math.sqrt(sum(float((x.grad ** 2).sum()) for x in params[a].values()))
                opt.step()
                logged[a].append({"loss": float(loss.detach()), "grad_norm": norm, "entropy": ent / tokens,
                                  "completion_length": tokens / (2 * len(pairs)), "lr": c["agent_learning_rate"], "steps": 1})
        with torch.no_grad():
            now = probe_lp()
        lengths = [[len(x) for own in probe for x in own[a]] for a in range(n)]

        def ratio(a, before):
            terms = [(now[a][k] - before[a][k]) / ln for k, ln in enumerate(lengths[a]) if ln > 0]
            return sum(terms) / len(terms) if terms else 0.0

        drift.append([{"logratio_prev": ratio(a, last), "logratio_initial": ratio(a, initial)} for a in range(n)])
        last = now

    expected = [dict(drains=logged[a], optimizer_steps=len(logged[a]), params=T.summaries(params[a], opts[a], gen)) for a in range(n)]
    config = {**c, "num_agents": n}
    return dict(config=config, prompts=prompts, samples=record, rewards=rewards, expected=expected,
                team=team_log, iterations=iter_log, drift=drift)


def main():
    names = T.select_cases(sys.argv[1:], sorted(CASES))
    cfg, weights, digest = T.load_micro()
    OUT.mkdir(parents=True, exist_ok=True)
    for name in names:
        out = run(name, CASES[name], cfg, weights)
        fixture = {"case": name, "model": "models/micro", "model_sha256": digest,
                   "generated_by": "scripts/make_iterative_fixtures.py (PyTorch %s, float64)" % torch.__version__, **out}
        path = OUT / f"{name}.json"
        path.write_text(json.dumps(fixture, separators=(",", ":")) + "\n")
        print(f"{name}: {path.stat().st_size // 1024} KB; pairs {[x['pairs'] for x in out['iterations']]}, "
              f"loss {[[round(d['loss'], 4) for d in e['drains']] for e in out['expected']]}, "
              f"margin {[round(x['margin'], 4) for x in out['team']]}")


if __name__ == "__main__":
    main()
