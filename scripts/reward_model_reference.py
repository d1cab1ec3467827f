"""Bradley-Terry reward-model training in PyTorch float64, written as CoMLRL's MARLHF does it
(comlrl/trainers/preference/marlhf.py: JointRewardModel, _train_reward_model), for
test/rl/reward-model.test.ts to compare magrpo's src/rl/reward-model.ts against.

stdin: {"model": dir, "head": {"weight": [C], "bias": b}, "lr": float, "weight_decay": float,
        "batches": [[{"chosen": [ids], "rejected": [ids]}, ...], ...]}
stdout: {"steps": [{"loss", "grad_norm", "grads": {name: [..]}}], "params": {name: [..]}}

Each batch is right-padded as a tokenizer pads it (chosen texts together, rejected together), the
reward read at the last non-pad token of the last hidden state, loss -mean log sigmoid(r_w - r_l),
one torch.optim.AdamW step per batch.
"""

import json
import sys

import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM


class JointRewardModel(torch.nn.Module):
    def __init__(self, backbone):
        super().__init__()
        self.backbone = backbone
        self.reward_head = torch.nn.Linear(backbone.config.hidden_size, 1)

    def forward(self, input_ids, attention_mask):
        out = self.backbone(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True, use_cache=False)
        hidden = out.hidden_states[-1]
        positions = torch.arange(attention_mask.size(1)).expand_as(attention_mask)
        last = positions.masked_fill(attention_mask == 0, 0).max(dim=1).values
        pooled = hidden[torch.arange(hidden.size(0)), last]
        return self.reward_head(pooled).squeeze(-1)


def rope_forward(self, x, position_ids):
    """HF's rotary embedding with its float32 inverse frequencies and angles, but cos/sin taken in
    float64 (HF takes them in float32), as magrpo's float64 engine does."""
    inv = self.inv_freq.float()
    angle = (position_ids[:, :, None].float() * inv[None, None, :]).double()
    emb = torch.cat((angle, angle), dim=-1)
    return (emb.cos() * self.attention_scaling).to(x.dtype), (emb.sin() * self.attention_scaling).to(x.dtype)


def rms_norm_forward(self, h):
    """HF's RMSNorm without its float32 cast (it computes in float32 whatever the input's dtype)."""
    return self.weight * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))


def pad(seqs, pad_id):
    width = max(len(s) for s in seqs)
    ids = torch.tensor([s + [pad_id] * (width - len(s)) for s in seqs])
    mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs])
    return ids, mask


def main():
    req = json.load(sys.stdin)
    torch.set_default_dtype(torch.float64)
    backbone = AutoModelForCausalLM.from_pretrained(req["model"], dtype=torch.float64, attn_implementation="sdpa")
    # HF keeps parts of the forward in float32 even for a float64 model; these two run in float64
    # here (sdpa on CPU is float64 throughout), so the comparison can be held to 1e-9.
    type(backbone.model.rotary_emb).forward = rope_forward
    type(backbone.model.norm).forward = rms_norm_forward
    rm = JointRewardModel(backbone).double()
    with torch.no_grad():
        rm.reward_head.weight.copy_(torch.tensor([req["head"]["weight"]]))
        rm.reward_head.bias.copy_(torch.tensor([req["head"]["bias"]]))
    rm.train()
    opt = torch.optim.AdamW(rm.parameters(), lr=req["lr"], weight_decay=req["weight_decay"])
    pad_id = 0
    named = dict(rm.named_parameters())
    steps = []
    for batch in req["batches"]:
        w_ids, w_mask = pad([p["chosen"] for p in batch], pad_id)
        l_ids, l_mask = pad([p["rejected"] for p in batch], pad_id)
        loss = -F.logsigmoid(rm(w_ids, w_mask) - rm(l_ids, l_mask)).mean()
        opt.zero_grad()
        loss.backward()
        norm = torch.sqrt(sum((p.grad**2).sum() for p in rm.parameters() if p.grad is not None))
        grads = {n: p.grad.flatten().tolist() for n, p in named.items() if p.grad is not None}
        opt.step()
        steps.append({"loss": loss.item(), "grad_norm": norm.item(), "grads": grads})
    params = {n: p.detach().flatten().tolist() for n, p in named.items()}
    json.dump({"steps": steps, "params": params}, sys.stdout)


if __name__ == "__main__":
    main()
