"""Request validation: every command's body is checked before any process acts on it, and an
error names the field (e.g. `samples[2].advantages: expected 4 numbers, got 3`)."""

from __future__ import annotations

COMMANDS = ("create_agent", "forward_backward", "optim_step", "save_adapter", "save_state", "load_state", "health", "shutdown")


class RequestError(ValueError):
    pass


def _need(cond: bool, path: str, msg: str) -> None:
    if not cond:
        raise RequestError(f"{path}: {msg}")


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _ints(v) -> bool:
    return isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in v)


def _nums_like(v, shape: list[list[int]]) -> bool:
    return isinstance(v, list) and len(v) == len(shape) and all(isinstance(r, list) and len(r) == len(c) and all(_num(x) for x in r) for r, c in zip(v, shape))


def validate(command: str, body: dict, agents: set[int]) -> None:
    _need(command in COMMANDS, "command", f"unknown command {command!r}; one of {', '.join(COMMANDS)}")
    _need(isinstance(body, dict), "body", "expected a JSON object")
    if command in ("health", "shutdown"):
        return
    agent = body.get("agent")
    _need(isinstance(agent, int) and not isinstance(agent, bool) and agent >= 0, "agent", f"expected an agent index, got {agent!r}")
    if command == "create_agent":
        for key in ("model_dir", "dtype", "optimizer", "loss"):
            _need(key in body, key, "missing")
        _need(body["dtype"] in ("float32", "float64", "bfloat16"), "dtype", f"expected float32, float64 or bfloat16, got {body['dtype']!r}")
        for key in ("lr", "betas", "eps", "weight_decay", "lr_scheduler", "warmup_steps", "total_steps"):
            _need(key in body["optimizer"], f"optimizer.{key}", "missing")
        for key in ("aggregation", "max_new_tokens"):
            _need(key in body["loss"], f"loss.{key}", "missing")
        _need(body["loss"]["aggregation"] in ("sequence_sum", "token_mean", "constant_norm"), "loss.aggregation", f"unknown {body['loss']['aggregation']!r}")
        return
    _need(agent in agents, "agent", f"agent {agent} was not created (create_agent first)")
    if command == "forward_backward":
        samples = body.get("samples")
        _need(isinstance(samples, list) and len(samples) > 0, "samples", "expected a non-empty list")
        for i, s in enumerate(samples):
            p = f"samples[{i}]"
            _need(isinstance(s, dict), p, "expected an object")
            _need(_ints(s.get("prompt_ids")) and len(s["prompt_ids"]) > 0, f"{p}.prompt_ids", "expected a non-empty list of token ids")
            comps = s.get("completions")
            _need(isinstance(comps, list) and all(_ints(c) for c in comps), f"{p}.completions", "expected a list of token-id lists")
            pref = s.get("preference")
            if pref is not None:
                # a preference pair (MADPO): [winner, loser] and DPO's terms instead of advantages
                _need(len(comps) == 2, f"{p}.completions", "a preference pair has 2 completions: [winner, loser]")
                _need(isinstance(pref, dict) and all(_num(pref.get(k)) for k in ("beta", "other_delta", "ref_delta")), f"{p}.preference",
                      "expected {beta, other_delta, ref_delta} numbers")
            else:
                adv = s.get("advantages")
                _need(isinstance(adv, list) and len(adv) == len(comps) and all(_num(a) for a in adv), f"{p}.advantages", f"expected {len(comps)} numbers")
            _need(_old_optional(s), f"{p}.old_logprobs", "expected one list of numbers per completion (one per token, or empty)")
            for key in ("ref_logprobs", "token_weights"):
                if s.get(key) is not None:
                    _need(_nums_like(s[key], comps), f"{p}.{key}", "expected one number per completion token (or null)")
    if command in ("save_adapter", "save_state", "load_state"):
        _need(isinstance(body.get("dir"), str) and body["dir"].startswith("/"), "dir", "expected an absolute path")


def _old_optional(s: dict) -> bool:
    # Without PPO clipping old log-probs are unused; magrpo still sends them, possibly empty.
    old = s.get("old_logprobs")
    return isinstance(old, list) and len(old) == len(s["completions"]) and all(isinstance(r, list) and all(_num(x) for x in r) for r in old)
