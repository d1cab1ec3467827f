"""The training peers of `magrpo bench --step --peers` (src/bench/step-peers.ts): one MAGRPO
training item on CoMLRL 1.4.3 (the reference library), one GRPO step on TRL's GRPOTrainer, on CPU,
on the same model folder, prompts and reward as magrpo's side.

Run by the bench, in .cache/venv-peers (scripts/setup.sh --with-peers):
    python scripts/bench_step_peers.py comlrl --model /tmp/smollm2-hf --items items.json --threads 2
    python scripts/bench_step_peers.py trl    --model /tmp/smollm2-hf --items items.json --threads 2

--items is the bench's file: TL;DR items (magrpo's writing environment, prompt_style chat), per
item and agent the prompt text magrpo renders and the token ids magrpo's tokenizer gives it (this
script checks that the HF tokenizer gives the same ids), plus the settings both sides use
(agents, G, new tokens, LoRA, sampling, learning rate, rollout_buffer_size). The reward is
magrpo's TL;DR reward itself, computed by `node scripts/tldr-reward.mjs` (dist/ build), so both
sides score completions identically.

comlrl: comlrl.MAGRPOTrainer with one PEFT LoRA model per agent (CoMLRL has no LoRA option of
its own; its `agents=` takes any model objects, and its AdamW gets all parameters, of which only
LoRA's require gradients). Items are fed to the trainer's own per-item step
(`_train_step_returns`, the body of its train() loop with eval_interval 0), which samples with HF
generate (num_return_sequences = G), scores, and updates every rollout_buffer_size items. Timed:
each item's wall time, and inside it sampling (`_generate_completions`), reward
(`_compute_rewards`) and update (`_update_from_samples`).

trl: trl.GRPOTrainer, one agent (N = 1), the agent-0 prompts, per_device_train_batch_size = G
(one prompt and its G completions per step), the same LoRA through peft_config, use_cpu; reward:
the TL;DR reward's structure level for one summary (0.5 when its whitespace word count is in
[8, 256], else 0: the TL;DR reward needs two agents' completions). Timed: each step's wall time
(a TrainerCallback), reward means from its logs.

Prints one JSON object last: the figures, versions and every setting.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


class NodeReward:
    """magrpo's TL;DR reward (src/envs/writing/rewards.ts) in a node child, one JSON line per call."""

    def __init__(self):
        self.proc = subprocess.Popen(
            ["node", os.path.join(HERE, "tldr-reward.mjs")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.seconds = 0.0

    def __call__(self, c1, c2):
        t0 = time.perf_counter()
        self.proc.stdin.write(json.dumps([c1, c2]) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("scripts/tldr-reward.mjs ended (is dist/ built? npm run build)")
        self.seconds += time.perf_counter() - t0
        return float(json.loads(line)["reward"])

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def median(xs):
    return statistics.median(xs) if xs else None


def load_model(path, torch, lora):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    m = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="sdpa")
    if lora is None:
        return m
    cfg = LoraConfig(r=lora["r"], lora_alpha=lora["alpha"], lora_dropout=0.0, target_modules=lora["target_modules"], task_type="CAUSAL_LM")
    return get_peft_model(m, cfg)


def check_ids(tok, items, agents):
    """The HF tokenizer's ids of each prompt text must be magrpo's (same prompts on both sides)."""
    bad = 0
    for it in items:
        for a in range(agents):
            ids = tok(it["prompts"][a], add_special_tokens=True)["input_ids"]
            if ids != it["ids"][a]:
                bad += 1
    return bad


def versions():
    import peft
    import torch
    import transformers

    out = {"python": sys.version.split()[0], "torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__}
    for name in ("comlrl", "trl", "accelerate", "datasets"):
        try:
            out[name] = __import__(name).__version__
        except Exception:
            pass
    out["torch_parallel_info"] = torch.__config__.parallel_info().strip().splitlines()[:6]
    out["mkldnn_enabled"] = bool(torch.backends.mkldnn.is_available())
    return out


def run_comlrl(args, spec, items):
    import torch
    from comlrl.trainers.reinforce import MAGRPOConfig, MAGRPOTrainer
    from transformers import AutoTokenizer

    s = spec["settings"]
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    tok = AutoTokenizer.from_pretrained(args.model)
    mismatched = check_ids(tok, items, s["agents"])
    # CoMLRL cuts each prompt at its first pad token (magrpo.py, _generate_completions); SmolLM2's pad
    # token is its <|im_end|>, which every chat prompt holds: pad with <|endoftext|> instead.
    pad_note = None
    if tok.pad_token_id == tok.eos_token_id:
        pad_note = f"pad token {tok.pad_token!r} is the EOS and occurs in the chat prompts; padded with '<|endoftext|>' instead"
        tok.pad_token = "<|endoftext|>"
    agents = []
    for _ in range(s["agents"]):
        m = load_model(args.model, torch, s["lora"])
        m.generation_config.pad_token_id = tok.pad_token_id
        agents.append(m)
    reward = NodeReward()
    cfg = MAGRPOConfig(
        num_train_epochs=1,
        agent_learning_rate=s["learning_rate"],
        num_agents=s["agents"],
        num_generations=s["group"],
        max_new_tokens=s["new_tokens"],
        temperature=s["temperature"],
        top_p=s["top_p"],
        top_k=s["top_k"],
        num_turns=1,
        eval_interval=0,
        rollout_buffer_size=s["buffer_size"],
        logging_steps=1,
    )
    trainer = MAGRPOTrainer(
        agents=agents,
        num_agents=s["agents"],
        tokenizer=tok,
        reward_func=lambda c1, c2: [reward(c1[0], c2[0])],
        formatters=[(lambda it, a=a: it["prompts"][a]) for a in range(s["agents"])],
        train_dataset=items,
        args=cfg,
    )
    clock = {"sample": 0.0, "reward": 0.0, "update": 0.0}
    rewards = []

    def timed(name, fn, keep=None):
        def wrapper(*a, **k):
            t0 = time.perf_counter()
            out = fn(*a, **k)
            clock[name] += time.perf_counter() - t0
            if keep is not None:
                keep(out)
            return out

        return wrapper

    trainer._generate_completions = timed("sample", trainer._generate_completions)
    trainer._compute_rewards = timed("reward", trainer._compute_rewards, lambda out: rewards.append(list(out)))
    trainer._update_from_samples = timed("update", trainer._update_from_samples)
    for i, a in enumerate(trainer.agents):
        a.to(trainer.agent_devices[i])
        a.train()
    per_item = []
    for i, it in enumerate(items[: args.warmup + args.count]):
        for k in clock:
            clock[k] = 0.0
        t0 = time.perf_counter()
        trainer._train_step_returns(it)
        wall = time.perf_counter() - t0
        rec = {"item": it["index"], "wall_s": wall, "warmup": i < args.warmup, **{f"{k}_s": v for k, v in clock.items()}}
        rec["reward_mean"] = statistics.fmean(rewards[-1]) if rewards else None
        rec["completion_tokens"] = None
        per_item.append(rec)
        print(f"[comlrl] item {i + 1}: {wall:.1f} s (sample {clock['sample']:.1f}, update {clock['update']:.1f}), reward mean {rec['reward_mean']}", file=sys.stderr)
    reward.close()
    timed_items = [r for r in per_item if not r["warmup"]]
    updates = [r["update_s"] for r in timed_items if r["update_s"] > 0]
    lora_params = sum(p.numel() for p in agents[0].parameters() if p.requires_grad)
    return {
        "engine": "comlrl",
        "item_s": [r["wall_s"] for r in timed_items],
        "median_item_s": median([r["wall_s"] for r in timed_items]),
        "mean_item_s": statistics.fmean(r["wall_s"] for r in timed_items),
        "sample_s_median": median([r["sample_s"] for r in timed_items]),
        "update_s_per_update": updates,
        # An update every rollout_buffer_size items: per item, the median sampling plus the median update spread over its items.
        "s_per_item": (median([r["sample_s"] for r in timed_items]) or 0) + (median(updates) or 0) / s["buffer_size"] + (median([r["reward_s"] for r in timed_items]) or 0),
        "items": per_item,
        "reward_means": [r["reward_mean"] for r in per_item],
        "trainable_params": lora_params,
        "prompt_ids_mismatched": mismatched,
        "notes": [n for n in [pad_note] if n],
        "settings": {
            "comlrl_config": {k: getattr(cfg, k) for k in ("num_agents", "num_generations", "max_new_tokens", "temperature", "top_p", "top_k", "agent_learning_rate", "rollout_buffer_size", "train_batch_size", "advantage_normalization", "advantage_mode", "reference_kl_enabled", "num_turns", "joint_mode")},
            "device": str(trainer.device),
            "dtype": "float32",
            "attn_implementation": "sdpa",
            "lora": s["lora"],
            "lora_dropout": 0.0,
            "threads": args.threads,
            "torch_num_threads": torch.get_num_threads(),
            "optimizer": "torch.optim.AdamW(agent.parameters(), lr) (torch defaults: weight_decay 0.01, betas 0.9/0.999)",
        },
    }


def run_trl(args, spec, items):
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    s = spec["settings"]
    torch.set_num_threads(args.threads)
    tok = AutoTokenizer.from_pretrained(args.model)
    mismatched = check_ids(tok, items, 1)
    n = args.warmup + args.count
    data = Dataset.from_list([{"prompt": it["prompts"][0]} for it in items[:n]])

    def structure(completions, **_):
        return [0.5 if 8 <= len(c.split()) <= 256 else 0.0 for c in completions]

    steps, logs = [], []

    class Clock(TrainerCallback):
        def on_step_begin(self, *_a, **_k):
            self.t0 = time.perf_counter()

        def on_step_end(self, *_a, **_k):
            steps.append(time.perf_counter() - self.t0)
            print(f"[trl] step {len(steps)}: {steps[-1]:.1f} s", file=sys.stderr)

        def on_log(self, _args, _state, _control, logs=None, **_k):
            if logs:
                seen.append(dict(logs))

    seen = logs
    out_dir = os.path.join(args.tmp, "trl-out")
    cfg = GRPOConfig(
        output_dir=out_dir,
        use_cpu=True,
        bf16=False,
        max_steps=n,
        per_device_train_batch_size=s["group"],
        gradient_accumulation_steps=1,
        num_generations=s["group"],
        max_completion_length=s["new_tokens"],
        temperature=s["temperature"],
        top_p=s["top_p"],
        top_k=s["top_k"] or 0,
        learning_rate=s["learning_rate"],
        weight_decay=0.01,
        lr_scheduler_type="constant",
        warmup_steps=0,
        beta=0.0,
        gradient_checkpointing=False,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        shuffle_dataset=False,
        seed=args.seed,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    lora = s["lora"]
    trainer = GRPOTrainer(
        model=args.model,
        reward_funcs=structure,
        args=cfg,
        train_dataset=data,
        processing_class=tok,
        peft_config=LoraConfig(r=lora["r"], lora_alpha=lora["alpha"], lora_dropout=0.0, target_modules=lora["target_modules"], task_type="CAUSAL_LM"),
        callbacks=[Clock()],
    )
    torch.set_num_threads(args.threads)
    trainer.train()
    timed_steps = steps[args.warmup :]
    step_logs = [l for l in logs if "reward" in l]
    return {
        "engine": "trl",
        "item_s": timed_steps,
        "median_item_s": median(timed_steps),
        "mean_item_s": statistics.fmean(timed_steps) if timed_steps else None,
        "s_per_item": median(timed_steps),
        "step_s": steps,
        "reward_means": [l.get("reward") for l in step_logs],
        "logs": step_logs,
        "prompt_ids_mismatched": mismatched,
        "settings": {
            "grpo_config": {k: getattr(cfg, k) for k in ("num_generations", "per_device_train_batch_size", "max_completion_length", "temperature", "top_p", "top_k", "learning_rate", "weight_decay", "beta", "loss_type", "scale_rewards", "num_iterations", "gradient_checkpointing", "use_vllm", "bf16", "use_cpu", "epsilon", "importance_sampling_level")},
            "agents": 1,
            "prompts": "agent 0's (the concise-summary prompt)",
            "reward": "TL;DR structure level for one summary: 0.5 if 8 <= whitespace words <= 256, else 0",
            "dtype": "float32",
            "lora": lora,
            "lora_dropout": 0.0,
            "threads": args.threads,
            "torch_num_threads": torch.get_num_threads(),
        },
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("engine", choices=["comlrl", "trl"])
    ap.add_argument("--model", required=True, help="HF model folder (magrpo convert of the GGUF)")
    ap.add_argument("--items", required=True, help="the bench's items file (prompts, ids, settings)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=None, help="untimed items first (default: the items file's)")
    ap.add_argument("--count", type=int, default=None, help="timed items (default: the items file's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tmp", default=os.environ.get("TMPDIR", "/tmp"))
    args = ap.parse_args()
    with open(args.items) as f:
        spec = json.load(f)
    items = spec["items"]
    s = spec["settings"]
    args.warmup = s["warmup_items"] if args.warmup is None else args.warmup
    args.count = s["items"] if args.count is None else args.count
    if len(items) < args.warmup + args.count:
        raise SystemExit(f"{args.items} holds {len(items)} items, need {args.warmup + args.count}")
    t0 = time.perf_counter()
    out = (run_comlrl if args.engine == "comlrl" else run_trl)(args, spec, items)
    out["total_s"] = time.perf_counter() - t0
    out["warmup_items"] = args.warmup
    out["timed_items"] = args.count
    out["versions"] = versions()
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["load_average_after"] = list(os.getloadavg())
    print(json.dumps(out))


if __name__ == "__main__":
    main()
