"""magrpo's losses, exactly as src/rl/algorithms/ computes them: the policy gradient (magrpo.ts), a
preference pair's DPO loss (madpo.ts, `preference_loss`), the actor-critic losses (iac.ts, maac.ts:
`actor_critic_loss`) and a critic's clipped value error (iac.ts, critics.ts: `value_error`).

For one node sample with B scored (non-empty) completions b, tokens t of completion b:

    c_t  = agg(len_b) / B * weight          agg: sequence_sum 1, token_mean 1/len_b, constant_norm 1/max_new_tokens
    loss = -sum_t c_t * w_t * A_b * logp_t                                        (plain policy gradient)
    loss = -sum_t c_t * w_t * min(r_t * A_b, clamp(r_t, 1-eps, 1+eps) * A_b)      (PPO, r_t = exp(logp_t - old_t))
    loss += beta * (sum_t c_t * (exp(d_t) - d_t) - sum_t c_t),  d_t = ref_t - logp_t (reference_kl mode "loss")

w_t are optional per-token weights (truncated importance sampling of remote rollouts), weight is
1 / (samples in the minibatch): the minibatch loss is the mean of its sample losses.
"""

from __future__ import annotations

import torch


def token_coefficient(aggregation: str, length: int, max_new_tokens: int) -> float:
    if aggregation == "sequence_sum":
        return 1.0
    if aggregation == "token_mean":
        return 1.0 / length
    return 1.0 / max_new_tokens


def sample_loss(logp: list[torch.Tensor], sample: dict, scored: list[int], loss_cfg: dict, weight: float):
    """Loss tensor (already x weight) and metrics of one sample.

    logp[b]: log-probs (with gradient) of completion scored[b]'s tokens, in order.
    Returns (loss, metrics) with metrics: entropy-free counters clipped, kl_sum, kl_tokens.
    """
    n = len(scored)
    agg, max_new = loss_cfg["aggregation"], loss_cfg["max_new_tokens"]
    eps, rkl = loss_cfg.get("ppo_clip_eps"), loss_cfg.get("reference_kl")
    total = None
    clipped = 0
    kl_sum, kl_tokens = 0.0, 0
    kl_term = None
    for b, g in enumerate(scored):
        lp = logp[b]
        length = lp.shape[0]
        dt, dev = lp.dtype, lp.device
        c = token_coefficient(agg, length, max_new) / n * weight
        adv = float(sample["advantages"][g])
        tw = sample.get("token_weights")
        w = torch.tensor(tw[g], dtype=dt, device=dev) if tw is not None else torch.ones(length, dtype=dt, device=dev)
        if eps is None:
            term = -(c * adv) * (w * lp).sum()
        else:
            old = torch.tensor(sample["old_logprobs"][g], dtype=dt, device=dev)
            ratio = torch.exp(lp - old)
            obj = torch.minimum(ratio * adv, torch.clamp(ratio, 1 - eps, 1 + eps) * adv)
            term = -c * (w * obj).sum()
            r = ratio.detach()
            clipped += int((((r < 1 - eps) & (adv < 0)) | ((r > 1 + eps) & (adv > 0))).sum())
        total = term if total is None else total + term
        refs = sample.get("ref_logprobs")
        if refs is not None:
            ref = torch.tensor(refs[g], dtype=dt, device=dev)
            d = ref - lp
            k3 = torch.exp(d) - d - 1
            kl_sum += float(k3.detach().sum())
            kl_tokens += length
            if rkl is not None and rkl["mode"] == "loss":
                part = c * (torch.exp(d) - d).sum() - c * length
                kl_term = part if kl_term is None else kl_term + part
    if kl_term is not None:
        total = total + rkl["coef"] * kl_term
    return total, {"clipped": clipped, "kl_sum": kl_sum, "kl_tokens": kl_tokens}


def preference_loss(logp: list[torch.Tensor], sample: dict, scored: list[int], weight: float):
    """A preference pair's loss (src/rl/algorithms/madpo.ts), already x weight.

    completions are [winner, loser]; logp[b] holds completion scored[b]'s token log-probs:

        delta = sum_t logp_w,t - sum_t logp_l,t            (an empty completion contributes 0)
        loss  = -log sigmoid(beta * (delta + other_delta - ref_delta)) * weight
    """
    p = sample["preference"]
    delta = sum((x.sum() if g == 0 else -x.sum()) for g, x in zip(scored, logp))
    z = p["beta"] * (delta + p["other_delta"] - p["ref_delta"])
    return -torch.nn.functional.logsigmoid(z) * weight, {"clipped": 0, "kl_sum": 0.0, "kl_tokens": 0}


ACTOR_CRITIC = ("iac", "maac")


def actor_critic_loss(logp: list[torch.Tensor], sample: dict, scored: list[int], loss_cfg: dict, weight: float, values=None, value_cfg=None):
    """An actor-critic sample's loss (src/rl/algorithms/iac.ts actorCriticLoss), already x weight.

    With K the sample's completions (empty ones included), per completion g:

        policy  -A_g / K * sum_t w_t * logp_t                               (no aggregation, no PPO clip)
        KL      beta / K * sum_t (exp(d_t) - d_t - 1), d_t = ref_t - logp_t  (reference_kl mode "loss")
        value   coef / K * value_error(V_g, old_g, target_g)                (an agent with a value head)

    values[g]: the head's value of completion g (a [] tensor with gradient), or None without a head.
    Returns (loss, metrics) with metrics clipped (0), kl_sum, kl_tokens and value_loss (the mean
    over the K completions of the value error, before coef and weight; None without a head).
    """
    K = len(sample["completions"])
    rkl = loss_cfg.get("reference_kl")
    total = None
    kl_sum, kl_tokens = 0.0, 0
    kl_term = None
    tw, refs = sample.get("token_weights"), sample.get("ref_logprobs")
    for b, g in enumerate(scored):
        lp = logp[b]
        dt, dev = lp.dtype, lp.device
        w = torch.tensor(tw[g], dtype=dt, device=dev) if tw is not None else torch.ones(lp.shape[0], dtype=dt, device=dev)
        term = -(float(sample["advantages"][g]) * weight / K) * (w * lp).sum()
        total = term if total is None else total + term
        if refs is not None:
            d = torch.tensor(refs[g], dtype=dt, device=dev) - lp
            kl_sum += float((torch.exp(d) - d - 1).detach().sum())
            kl_tokens += lp.shape[0]
            if rkl is not None and rkl["mode"] == "loss":
                part = (weight / K) * (torch.exp(d) - d).sum() - (weight / K) * lp.shape[0]
                kl_term = part if kl_term is None else kl_term + part
    if kl_term is not None:
        total = total + rkl["coef"] * kl_term
    value_loss = None
    if value_cfg is not None:
        critic = sample["critic"]
        value_loss = 0.0
        for g in range(K):
            err = value_error(values[g], critic["old_values"][g], critic["targets"][g], value_cfg.get("value_clip_range"))
            value_loss += float(err.detach()) / K
            term = err * (value_cfg["value_loss_coef"] * weight / K)
            total = term if total is None else total + term
    if total is None:  # nothing scored and no head: a zero that still reaches the graph
        total = sum(x.sum() for x in logp) * 0.0 if logp else torch.zeros(())
    return total, {"clipped": 0, "kl_sum": kl_sum, "kl_tokens": kl_tokens, "value_loss": value_loss}


def value_error(v: torch.Tensor, old: float, target: float, clip: float | None) -> torch.Tensor:
    """(t - V)^2, or with clip range eps max((t - V)^2, (t - V_old - clamp(V - V_old, -eps, eps))^2)
    as src/rl/algorithms/iac.ts and src/rl/critics.ts take it: the clipped term only where it is
    strictly larger, so where the two tie (V inside the range) the gradient is the plain one's."""
    err = (v - target) ** 2
    if clip is not None:
        clipped = (old + torch.clamp(v - old, -clip, clip) - target) ** 2
        if float(clipped.detach()) > float(err.detach()):
            err = clipped
    return err


def lr_multiplier(step: int, kind: str, warmup: int, total: int) -> float:
    """src/engine/optim.ts lrMultiplier: linear warmup, then constant / linear / cosine to 0."""
    import math

    if step < warmup:
        return (step + 1) / warmup
    if kind == "constant":
        return 1.0
    if total <= warmup:
        raise ValueError(f"{kind} schedule needs total_steps > warmup_steps")
    progress = min(1.0, (step - warmup) / (total - warmup))
    return 1 - progress if kind == "linear" else 0.5 * (1 + math.cos(math.pi * progress))
