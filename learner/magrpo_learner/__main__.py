"""python -m magrpo_learner --listen unix:/tmp/l.sock | http://127.0.0.1:7000 [--device cpu|cuda]
Under torchrun every process runs this; rank 0 serves, the others follow (learner/README.md)."""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist

from .server import Learner, follow, serve


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="magrpo_learner", description="PyTorch learner for magrpo (learner/README.md)")
    ap.add_argument("--listen", required=True, help="unix:/path/to.sock or http://host:port (rank 0 listens)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--parallel", choices=["ddp", "fsdp"], default="ddp", help="ddp: whole model per process; fsdp: FSDP2, sharded over the processes")
    ap.add_argument("--max-message-mb", type=float, default=256)
    ap.add_argument("--threads", type=int, default=0, help="torch intra-op threads per process (0 = torch's default)")
    a = ap.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if a.device == "cuda":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        dist.init_process_group("nccl" if a.device == "cuda" else "gloo")
    learner = Learner(device, a.parallel)
    if not dist.is_initialized() or dist.get_rank() == 0:
        serve(a.listen, learner, int(a.max_message_mb * 1024 * 1024))
    else:
        follow(learner)
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
