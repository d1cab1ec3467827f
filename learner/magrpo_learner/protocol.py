"""Request validation: every command's body is checked before any process acts on it, and an
error names the field (e.g. `samples[2].advantages: expected 4 numbers, got 3`)."""

from __future__ import annotations

COMMANDS = ("create_agent", "forward_backward", "value_forward_backward", "optim_step", "save_adapter", "save_state", "load_state", "load_weights",
            "health", "shutdown")


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


def validate(command: str, body: dict, agents: dict) -> None:
    """`agents`: the learners created so far, by (agent, critic), each with its `value_cfg`."""
    _need(command in COMMANDS, "command", f"unknown command {command!r}; one of {', '.join(COMMANDS)}")
    _need(isinstance(body, dict), "body", "expected a JSON object")
    if command in ("health", "shutdown"):
        return
    agent = body.get("agent")
    _need(isinstance(agent, int) and not isinstance(agent, bool) and agent >= 0, "agent", f"expected an agent index, got {agent!r}")
    _need(body.get("critic") in (None, True, False), "critic", f"expected true (the agent's critic model) or false, got {body.get('critic')!r}")
    if command == "create_agent":
        for key in ("model_dir", "dtype", "optimizer", "loss"):
            _need(key in body, key, "missing")
        _need(body["dtype"] in ("float32", "float64", "bfloat16"), "dtype", f"expected float32, float64 or bfloat16, got {body['dtype']!r}")
        for key in ("lr", "betas", "eps", "weight_decay", "lr_scheduler", "warmup_steps", "total_steps"):
            _need(key in body["optimizer"], f"optimizer.{key}", "missing")
        for key in ("aggregation", "max_new_tokens"):
            _need(key in body["loss"], f"loss.{key}", "missing")
        _need(body["loss"]["aggregation"] in ("sequence_sum", "token_mean", "constant_norm"), "loss.aggregation", f"unknown {body['loss']['aggregation']!r}")
        _need(body["loss"].get("algorithm") is None or isinstance(body["loss"]["algorithm"], str), "loss.algorithm", "expected a name")
        vh = body.get("value_head")
        if vh is not None:
            _need(isinstance(vh, dict), "value_head", "expected {type, value_clip_range, value_loss_coef, init} or null")
            _need(vh.get("type") in ("v", "q"), "value_head.type", f"expected v or q, got {vh.get('type')!r}")
            clip = vh.get("value_clip_range")
            _need(clip is None or (_num(clip) and clip > 0), "value_head.value_clip_range", f"expected a positive number or null, got {clip!r}")
            _need(_num(vh.get("value_loss_coef")) and vh["value_loss_coef"] >= 0, "value_head.value_loss_coef", "expected a number >= 0")
            init = vh.get("init")
            _need(init is None or (isinstance(init, str) and init.startswith("/")), "value_head.init", "expected an absolute path or null")
        _need(vh is not None or not body.get("critic"), "value_head", "a critic model needs a value head")
        return
    key = (agent, bool(body.get("critic")))
    who = f"agent {agent}'s critic" if key[1] else f"agent {agent}"
    _need(key in agents, "agent", f"{who} was not created (create_agent first)")
    head = getattr(agents[key], "value_cfg", None) is not None
    if command == "value_forward_backward":
        _need(head, "agent", "value_forward_backward needs a learner with a value head")
        examples = body.get("examples")
        _need(isinstance(examples, list) and len(examples) > 0, "examples", "expected a non-empty list")
        for i, e in enumerate(examples):
            p = f"examples[{i}]"
            _need(isinstance(e, dict), p, "expected an object")
            _need(_ints(e.get("ids")) and len(e["ids"]) > 0, f"{p}.ids", "expected a non-empty list of token ids")
            for k in ("target", "old_value"):
                _need(_num(e.get(k)), f"{p}.{k}", "expected a number")
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
            if head:
                c = s.get("critic")
                _need(isinstance(c, dict) and all(isinstance(c.get(k), list) and len(c[k]) == len(comps) and all(_num(x) for x in c[k])
                                                  for k in ("old_values", "targets")), f"{p}.critic", f"expected {{old_values, targets}}, {len(comps)} numbers each (the agent has a value head)")
    if command in ("save_adapter", "save_state", "load_state", "load_weights"):
        _need(isinstance(body.get("dir"), str) and body["dir"].startswith("/"), "dir", "expected an absolute path")


def _old_optional(s: dict) -> bool:
    # Without PPO clipping old log-probs are unused; magrpo still sends them, possibly empty.
    old = s.get("old_logprobs")
    return isinstance(old, list) and len(old) == len(s["completions"]) and all(isinstance(r, list) and all(_num(x) for x in r) for r in old)
