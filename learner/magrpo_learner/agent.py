"""One agent's learner: a Hugging Face causal LM (with PEFT LoRA adapters, or all weights
trainable), optionally with a value head (IAC's actors, and the critic models of IAC and MAAC),
AdamW with magrpo's hyperparameters and LR schedule, data parallel over the torch.distributed
group when there is one: DDP (every process holds the whole model), or FSDP2 (`fully_shard`: every
decoder layer, then the root, sharded over the processes)."""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from .loss import ACTOR_CRITIC, actor_critic_loss, lr_multiplier, preference_loss, sample_loss, value_error

DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16}


VALUE_HEAD_FILE = "value_head.safetensors"


class ValueHead(torch.nn.Module):
    """v = w . h + b on the final hidden state (after the final norm): src/model/value-head.ts, TRL's
    `v_head.summary` (its state dict names, as value_head.safetensors has them)."""

    def __init__(self, hidden: int, dtype: torch.dtype):
        super().__init__()
        self.summary = torch.nn.Linear(hidden, 1, dtype=dtype)
        with torch.no_grad():  # CoMLRL's initialisation; magrpo sends its own head (value_head.init)
            self.summary.weight.normal_(0.0, 0.02)
            self.summary.bias.zero_()


class Scorer(torch.nn.Module):
    """log pi(token) of every completion token and the entropy of its row; the LM head runs only
    on rows that predict a completion token (as src/model/logprobs.ts). With a value head, also the
    value at the rows `value_rows` (a sequence's last prompt token, or its last token)."""

    def __init__(self, model, value_head: ValueHead | None = None):
        super().__init__()
        self.model = model
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        self.decoder = base.base_model
        self.head = base.get_output_embeddings()
        self.v_head = value_head

    def forward(self, ids, mask, rows, targets, value_rows=None):
        hidden = self.decoder(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state
        flat = hidden.reshape(-1, hidden.shape[-1])
        h = flat[rows]
        logits = self.head(h)
        lsm = torch.log_softmax(logits.to(torch.float32) if logits.dtype == torch.bfloat16 else logits, -1)
        lp = lsm.gather(-1, targets[:, None]).sum(-1)  # not a view (FSDP hooks the root's outputs for backward)
        entropy = -(lsm.exp() * lsm).sum(-1).detach()
        if self.v_head is None or value_rows is None:
            return lp, entropy, lp.new_zeros(0)
        return lp, entropy, self.v_head.summary(flat[value_rows]).reshape(-1)


def world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class AgentLearner:
    def __init__(self, req: dict, device: torch.device, parallel: str):
        import transformers
        from transformers import AutoModelForCausalLM

        self.req = req
        self.device = device
        self.dtype = DTYPES[req["dtype"]]
        self.loss_cfg = req["loss"]
        self.opt_cfg = req["optimizer"]
        self.model_dir = req["model_dir"]
        kw = {"dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype": self.dtype}
        if self.dtype == torch.float64:
            kw["attn_implementation"] = "eager"
        model = AutoModelForCausalLM.from_pretrained(self.model_dir, **kw)
        lora = req.get("lora")
        if lora:
            from peft import LoraConfig, PeftModel, get_peft_model

            if req.get("init_adapter"):
                model = PeftModel.from_pretrained(model, req["init_adapter"], is_trainable=True)
            else:
                cfg = LoraConfig(r=lora["r"], lora_alpha=lora["alpha"], target_modules=lora["target_modules"], lora_dropout=0.0,
                                 bias="none", task_type="CAUSAL_LM", fan_in_fan_out=model.config.model_type == "gpt2")
                model = get_peft_model(model, cfg)
            if self.dtype != torch.bfloat16:
                model.to(self.dtype)
        self.rank, self.world = world()
        # FSDP over one process is the unsharded model (as DDP over one process is).
        self.sharded = parallel == "fsdp" and self.world > 1
        if not any(p.requires_grad for p in model.parameters()):
            raise ValueError("no trainable parameters (lora.target_modules matched nothing?)")
        self.model = model
        # A value head: IAC's actor (value_head.type v or q: its value term joins the loss) or a
        # critic model (`critic`: value_forward_backward regresses values of whole inputs).
        self.value_cfg = req.get("value_head")
        if self.value_cfg is not None and not req.get("critic") and self.loss_cfg.get("algorithm") not in ACTOR_CRITIC:
            raise ValueError(f"value_head: algorithm {self.loss_cfg.get('algorithm')!r} has no critic; an actor's value head is for {', '.join(ACTOR_CRITIC)}")
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        self.v_head = ValueHead(base.config.hidden_size, self.dtype) if self.value_cfg is not None else None
        if self.v_head is not None and self.value_cfg.get("init"):
            load_value_head(self.v_head, Path(self.value_cfg["init"]) / VALUE_HEAD_FILE)
        self.scorer = Scorer(model, self.v_head)
        if self.sharded:
            # From the CPU copy straight to shards on `device`: no process holds the whole model there.
            layers = shard(self.scorer, model, device)
        else:
            self.scorer.to(device)
            if self.world > 1:
                ids = [device.index] if device.type == "cuda" else None
                self.scorer = torch.nn.parallel.DistributedDataParallel(self.scorer, device_ids=ids)
        # After fully_shard: the parameters are the sharded DTensors it put in place.
        self.model_params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        self.head_params = [(f"v_head.{n}", p) for n, p in self.v_head.named_parameters()] if self.v_head is not None else []
        self.params = self.model_params + self.head_params
        for _, p in self.params:
            p.grad = torch.zeros_like(p)
        if self.rank == 0:
            how = f"FSDP2 ({layers} decoder layers, then the root, sharded)" if self.sharded else "DDP" if self.world > 1 else "one process"
            n = sum(p.numel() for _, p in self.params)
            who = f"agent {req.get('agent')}" + ("'s critic" if req.get("critic") else "")
            head = " with a value head" if self.v_head is not None else ""
            print(f"magrpo-learner: {who}: {n} trainable parameters{head}, {how} over {self.world} process(es)", file=sys.stderr, flush=True)
        o = self.opt_cfg
        self.opt = torch.optim.AdamW([p for _, p in self.params], lr=o["lr"], betas=tuple(o["betas"]), eps=o["eps"], weight_decay=o["weight_decay"])
        self.steps = 0

    # ---- forward_backward ---------------------------------------------------------------------

    def _padded(self, seqs: list[list[int]]):
        T = max(len(x) for x in seqs)
        ids = torch.zeros(len(seqs), T, dtype=torch.long)
        mask = torch.zeros(len(seqs), T, dtype=torch.long)
        for b, x in enumerate(seqs):
            ids[b, : len(x)] = torch.tensor(x)
            ids[b, len(x):] = x[-1]
            mask[b, : len(x)] = 1
        return ids.to(self.device), mask.to(self.device), T

    def _long(self, v: list[int]) -> torch.Tensor:
        return torch.tensor(v, dtype=torch.long, device=self.device)

    def _batch(self, samples: list[tuple[int, dict]]):
        """One right-padded batch over every scored completion of `samples`; with a value head over
        every completion (an empty one is its prompt: it still has a value to regress), with the
        row of each one's value: its prompt's last token (type v) or its own last token (q)."""
        seqs, rows, targets, owner = [], [], [], []
        for i, s in samples:
            for g, c in enumerate(s["completions"]):
                if c or self.v_head is not None:
                    seqs.append(s["prompt_ids"] + c)
                    owner.append((i, g, len(s["prompt_ids"]), len(c)))
        ids, mask, T = self._padded(seqs)
        for b, (i, g, p, n) in enumerate(owner):
            rows.extend(b * T + p - 1 + j for j in range(n))
            targets.extend(seqs[b][p:p + n])
        value_rows = None
        if self.v_head is not None:
            q = self.value_cfg.get("type") == "q"
            value_rows = self._long([b * T + p - 1 + (n if q else 0) for b, (_, _, p, n) in enumerate(owner)])
        return ids, mask, self._long(rows), self._long(targets), value_rows, owner

    def _has_loss(self, s: dict) -> bool:
        return any(s["completions"]) or (self.v_head is not None and len(s["completions"]) > 0)

    def forward_backward(self, samples: list[dict]) -> dict:
        n = len(samples)
        weight = 1.0 / n
        mine = [(i, s) for i, s in enumerate(samples) if i % self.world == self.rank]
        scored_mine = [(i, s) for i, s in mine if self._has_loss(s)]
        any_scored = any(self._has_loss(s) for s in samples)
        actor_critic = self.loss_cfg.get("algorithm") in ACTOR_CRITIC
        out = {"loss": 0.0, "entropy_sum": 0.0, "tokens": 0, "sequences": 0, "clipped": 0, "kl_sum": 0.0, "kl_tokens": 0, "logprobs": {},
               "value_loss": 0.0 if self.v_head is not None else None}
        if any_scored:
            # Every process runs one forward and one backward (DDP all-reduces in backward); one
            # without scored samples scores the first scored sequence with weight 0.
            dummy = not scored_mine
            batch = scored_mine or [next((i, s) for i, s in enumerate(samples) if self._has_loss(s))]
            ids, mask, rows, targets, value_rows, owner = self._batch(batch)
            lp, ent, values = self.scorer(ids, mask, rows, targets, value_rows)
            total = lp.sum() * 0.0 + values.sum() * 0.0
            at = 0
            per = {}
            for b, (i, g, _, length) in enumerate(owner):
                per.setdefault(i, []).append((g, lp[at:at + length], ent[at:at + length], values[b] if value_rows is not None else None))
                at += length
            if not dummy:
                for i, parts in per.items():
                    s = samples[i]
                    scored = [g for g, x, _, _ in parts if x.shape[0] > 0]
                    logp = [x for _, x, _, _ in parts if x.shape[0] > 0]
                    if s.get("preference"):
                        loss, m = preference_loss(logp, s, scored, weight)
                    elif actor_critic:
                        vals = [None] * len(s["completions"])
                        for g, _, _, v in parts:
                            vals[g] = v
                        loss, m = actor_critic_loss(logp, s, scored, self.loss_cfg, weight, vals, self.value_cfg)
                    else:
                        loss, m = sample_loss(logp, s, scored, self.loss_cfg, weight)
                    value = float(loss.detach())
                    if not math.isfinite(value):
                        raise ValueError(f"the loss is {value}; check the reward values and the learning rate")
                    total = total + loss
                    out["loss"] += value
                    out["entropy_sum"] += float(sum(e.sum() for _, _, e, _ in parts))
                    out["tokens"] += sum(x.shape[0] for x in logp)
                    out["sequences"] += len(s["completions"])
                    for k in ("clipped", "kl_sum", "kl_tokens"):
                        out[k] += m[k]
                    if m.get("value_loss") is not None:
                        out["value_loss"] += m["value_loss"] * weight
                    lps = [[] for _ in s["completions"]]
                    for g, x, _, _ in parts:
                        lps[g] = x.detach().double().tolist()
                    out["logprobs"][i] = lps
            # DDP's all-reduce and FSDP's reduce-scatter average gradients over processes: scale so
            # the sum over processes is the minibatch gradient.
            (total * self.world).backward()
        for i, s in mine:
            out["logprobs"].setdefault(i, [[] for _ in s["completions"]])
        return out

    def value_forward_backward(self, examples: list[dict]) -> dict:
        """A critic model's minibatch (src/rl/critics.ts CriticModel.step): per example its value
        V at the last token of `ids`, the loss value_loss_coef * mean value_error(V, old_value,
        target), its gradient added to the accumulated one. Returns this process's share of the
        mean value error."""
        if self.v_head is None:
            raise ValueError("value_forward_backward: this learner has no value head (create it with value_head)")
        n = len(examples)
        coef, clip = self.value_cfg["value_loss_coef"], self.value_cfg.get("value_clip_range")
        mine = [(i, e) for i, e in enumerate(examples) if i % self.world == self.rank]
        dummy = not mine  # a process without examples values the first with weight 0
        batch = mine or [(0, examples[0])]
        ids, mask, T = self._padded([e["ids"] for _, e in batch])
        none = self._long([])
        lp, _, values = self.scorer(ids, mask, none, none, self._long([b * T + len(e["ids"]) - 1 for b, (_, e) in enumerate(batch)]))
        total = lp.sum() * 0.0 + values.sum() * 0.0
        value_loss = 0.0
        if not dummy:
            for b, (_, e) in enumerate(batch):
                err = value_error(values[b], e["old_value"], e["target"], clip)
                v = float(err.detach())
                if not math.isfinite(v):
                    raise ValueError(f"the value loss is {v}; check the reward values and the learning rate")
                value_loss += v / n
                total = total + err * (coef / n)
        (total * self.world).backward()
        return {"value_loss": value_loss}

    # ---- optim_step ---------------------------------------------------------------------------

    def optim_step(self) -> dict:
        o = self.opt_cfg
        lr = o["lr"] * lr_multiplier(self.steps, o["lr_scheduler"], o["warmup_steps"], o["total_steps"])
        for group in self.opt.param_groups:
            group["lr"] = lr
        grads = [p.grad for _, p in self.params]
        if self.sharded:
            # The gradients are DTensor shards: per-tensor float64 norms are partial over the
            # processes, and full_tensor() reduces them to the norm of the whole gradient.
            total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g, 2, dtype=torch.float64) for g in grads]), 2)
            norm = float(total.full_tensor())
        else:
            norm = math.sqrt(sum(float(g.double().pow(2).sum()) for g in grads))
        if not math.isfinite(norm):
            raise ValueError(f"gradient norm is {norm}; refusing to update (check rewards and learning rate)")
        if o.get("max_grad_norm") is not None:
            if self.sharded:
                # torch's clip for (sharded) DTensor gradients: max_norm / (norm + 1e-6), at most 1.
                torch.nn.utils.clip_grads_with_norm_([p for _, p in self.params], o["max_grad_norm"], total)
            else:
                coef = o["max_grad_norm"] / (norm + 1e-6)
                if coef < 1:
                    for g in grads:
                        g.mul_(coef)
        self.opt.step()
        self.opt.zero_grad(set_to_none=False)
        self.steps += 1
        return {"grad_norm": norm, "lr": lr, "step": self.steps}

    # ---- files --------------------------------------------------------------------------------

    def _model_state(self, trainable_only: bool) -> dict:
        """The model's state dict with whole tensors; under FSDP a collective (every process calls
        it) that gathers the shards to rank 0's CPU and returns {} elsewhere."""
        if not self.sharded:
            state = self.model.state_dict()
            return {n: state[n] for n, _ in self.model_params} if trainable_only else state
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        options = StateDictOptions(full_state_dict=True, cpu_offload=True, ignore_frozen_params=trainable_only)
        return get_model_state_dict(self.model, options=options)

    def _head_state(self) -> dict:
        """The value head's tensors, whole, on every process (under FSDP a collective)."""
        out = {}
        for n, p in self.head_params:
            if self.sharded:
                p = p.full_tensor()
            out[n] = p.detach().cpu()
        return out

    def save_adapter(self, out: str) -> None:
        """A PEFT adapter folder (LoRA) or a HF model folder, float32 unless training in bfloat16;
        with a value head, its value_head.safetensors beside them (src/model/value-head.ts names)."""
        lora = bool(self.req.get("lora"))
        state = self._model_state(trainable_only=lora)  # every process: a collective under FSDP
        head = self._head_state()
        if self.rank != 0:
            return
        from safetensors.torch import save_file

        path = Path(out)
        path.mkdir(parents=True, exist_ok=True)
        cast = lambda t: (t.float() if t.dtype == torch.float64 else t).detach().cpu().contiguous()
        if head:
            save_file({k: cast(v) for k, v in head.items()}, str(path / VALUE_HEAD_FILE), metadata={"format": "pt"})
        if lora:
            from peft import get_peft_model_state_dict

            state = {k: cast(v) for k, v in get_peft_model_state_dict(self.model, state_dict=state).items()}
            save_file(state, str(path / "adapter_model.safetensors"), metadata={"format": "pt"})
            self.model.peft_config["default"].save_pretrained(str(path))
        else:
            state = {k: cast(v) for k, v in state.items()}
            if getattr(self.model.config, "tie_word_embeddings", False):
                state.pop("lm_head.weight", None)
            save_file(state, str(path / "model.safetensors"), metadata={"format": "pt"})
            for f in os.listdir(self.model_dir):
                if f.endswith(".json") and f != "model.safetensors.index.json":
                    shutil.copy(os.path.join(self.model_dir, f), path / f)

    def _optimizer_state(self) -> dict:
        """AdamW's state dict with whole tensors (keyed by parameter index, as torch saves it
        unsharded, so DDP and FSDP write the same file); under FSDP a collective that gathers one
        tensor at a time, kept on rank 0's CPU only."""
        state = self.opt.state_dict()
        if not self.sharded:
            return state
        from torch.distributed.tensor import DTensor

        whole = {}
        for i in sorted(state["state"]):
            whole[i] = {}
            for k, v in state["state"][i].items():
                if isinstance(v, DTensor):
                    v = v.full_tensor()
                whole[i][k] = v.detach().cpu() if isinstance(v, torch.Tensor) else v
        return {"state": whole if self.rank == 0 else {}, "param_groups": state["param_groups"]}

    def save_state(self, out: str) -> None:
        weights = {**self._model_state(trainable_only=True), **self._head_state()}  # every process: collectives under FSDP
        optimizer = self._optimizer_state()
        if self.rank != 0:
            return
        Path(out).mkdir(parents=True, exist_ok=True)
        state = {"optimizer": optimizer, "steps": self.steps, "weights": {n: weights[n].detach().cpu() for n, _ in self.params}}
        tmp = Path(out) / "torch_learner.pt.tmp"
        torch.save(state, tmp)
        os.replace(tmp, Path(out) / "torch_learner.pt")
        (Path(out) / "torch_learner.json").write_text(json.dumps({"steps": self.steps}) + "\n")

    def load_state(self, src: str) -> None:
        """Every process reads the whole state (written by DDP or FSDP) and keeps its own shards."""
        f = Path(src) / "torch_learner.pt"
        if not f.exists():
            raise ValueError(f"{f}: no learner state here (a checkpoint written with learner.backend torch has one)")
        state = torch.load(f, map_location="cpu" if self.sharded else self.device)
        for n, _ in self.params:  # checked before any collective, identically on every process
            if n not in state["weights"]:
                raise ValueError(f"{f}: no weights for parameter {n}")
        optimizer = state["optimizer"]
        with torch.no_grad():
            for i, (n, p) in enumerate(self.params):
                p.copy_(local_part(state["weights"][n], p))
                for k, v in optimizer["state"].get(i, {}).items():
                    if k != "step" and isinstance(v, torch.Tensor):  # exp_avg, exp_avg_sq: shaped as p
                        optimizer["state"][i][k] = local_part(v, p)
        self.opt.load_state_dict(optimizer)
        self.steps = int(state["steps"])

    def load_weights(self, src: str) -> None:
        """The trainable weights (and value head) from a folder laid out as save_adapter writes it,
        the optimizer state and step counter untouched: a learner that starts from weights the
        trainer set after create_agent."""
        from safetensors.torch import load_file

        lora = bool(self.req.get("lora"))
        f = Path(src) / ("adapter_model.safetensors" if lora else "model.safetensors")
        if not f.exists():
            raise ValueError(f"{f}: not found (load_weights reads a folder as save_adapter writes it)")
        saved = load_file(str(f))
        if self.head_params:
            hf = Path(src) / VALUE_HEAD_FILE
            if not hf.exists():
                raise ValueError(f"{hf}: not found (this learner has a value head)")
            saved.update({f"v_head.{k.removeprefix('v_head.')}": v for k, v in load_file(str(hf)).items()})
        # PEFT's saved names drop the adapter name: ...q_proj.lora_A.weight for ...q_proj.lora_A.default.weight
        key = lambda n: n.replace(".default", "") if lora and not n.startswith("v_head.") else n
        for n, _ in self.params:  # checked before any collective, identically on every process
            if key(n) not in saved:
                raise ValueError(f"{f.parent}: no tensor {key(n)} for parameter {n}")
        with torch.no_grad():
            for n, p in self.params:
                p.copy_(local_part(saved[key(n)].reshape(p.shape), p))


def load_value_head(head: ValueHead, file: Path) -> None:
    """value_head.safetensors (v_head.summary.weight [1, C], v_head.summary.bias [1]) into `head`."""
    from safetensors.torch import load_file

    if not file.exists():
        raise ValueError(f"value_head.init: {file} not found")
    t = load_file(str(file))
    with torch.no_grad():
        for name, p in head.summary.named_parameters():
            key = f"v_head.summary.{name}"
            if key not in t or t[key].numel() != p.numel():
                raise ValueError(f"{file}: needs {key} with {p.numel()} values")
            p.copy_(t[key].reshape(p.shape).to(p.dtype))


def local_part(whole: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """`whole` as `like` holds it: the same DTensor shards (a collective) or a plain tensor."""
    from torch.distributed.tensor import DTensor, distribute_tensor

    if isinstance(like, DTensor):
        return distribute_tensor(whole.to(like.device, like.dtype), like.device_mesh, like.placements)
    return whole.to(like.device, like.dtype)


def shard(scorer: Scorer, model, device: torch.device) -> int:
    """FSDP2 in place: fully_shard every decoder layer (the model's _no_split_modules, e.g.
    LlamaDecoderLayer), then the scorer as root (embeddings, final norm, LM head). Frozen and
    trainable parameters (LoRA) share a layer's group; only the trainable ones get gradients."""
    from torch.distributed.device_mesh import init_device_mesh

    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:
        raise ValueError(f"parallel fsdp needs torch >= 2.6 (FSDP2: torch.distributed.fsdp.fully_shard); this is torch {torch.__version__}") from None
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    kinds = set(getattr(base, "_no_split_modules", None) or [])
    layers = [m for m in model.modules() if type(m).__name__ in kinds]
    if not layers:
        raise ValueError(f"parallel fsdp: no decoder layers to shard in {type(base).__name__} (its _no_split_modules is {sorted(kinds) or 'empty'})")
    for layer in layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(scorer, mesh=mesh)
    return len(layers)
