"""Logits of a token sequence under a HF checkpoint, optionally with a PEFT LoRA adapter: checks that
magrpo's checkpoints and adapters load in transformers + peft and mean the same model there.

    python -m magrpo_learner.logits --model models/micro --adapter run/checkpoints/latest/agent_0/adapter --ids 0,17,42 [--dtype float64]

Prints {"shape": [T, V], "logits": [...]} (row-major) as JSON on stdout.
"""

from __future__ import annotations

import argparse
import json

import torch

from .agent import DTYPES


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="magrpo_learner.logits")
    ap.add_argument("--model", required=True)
    ap.add_argument("--adapter", default=None)
    ap.add_argument("--ids", required=True, help="comma-separated token ids")
    ap.add_argument("--dtype", choices=list(DTYPES), default="float32")
    a = ap.parse_args(argv)
    import transformers
    from transformers import AutoModelForCausalLM

    dtype = DTYPES[a.dtype]
    kw = {"dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype": dtype, "attn_implementation": "eager"}
    model = AutoModelForCausalLM.from_pretrained(a.model, **kw)
    if a.adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, a.adapter)
        model.to(dtype)
    model.eval()
    ids = torch.tensor([[int(x) for x in a.ids.split(",")]])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].double()
    print(json.dumps({"shape": list(logits.shape), "logits": logits.flatten().tolist()}))


if __name__ == "__main__":
    main()
