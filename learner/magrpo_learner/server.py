"""The learner's HTTP endpoint (POST /v1/<command>, JSON in and out, HTTP/1.0: one request per
connection, served one at a time). Rank 0 listens; it validates a request, broadcasts it to every
process of the torch.distributed group, all of them execute it, and rank 0 answers."""

from __future__ import annotations

import http.server
import json
import os
import socketserver
import sys
import traceback

import torch
import torch.distributed as dist

from .agent import AgentLearner, world
from .protocol import RequestError, validate


class Learner:
    """Every agent's learner in this process, and the command dispatch. A learner is addressed by
    (agent, critic): an agent's policy, or with `critic: true` its critic model (IAC's separate
    critic of agent i, MAAC's shared critic as agent 0's)."""

    def __init__(self, device: torch.device, parallel: str):
        self.device, self.parallel = device, parallel
        self.agents: dict[tuple[int, bool], AgentLearner] = {}

    def run(self, command: str, body: dict) -> dict:
        if command == "health":
            import peft
            import transformers

            rank, size = world()
            return {"world_size": size, "device": str(self.device), "torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__}
        a = (body.get("agent"), bool(body.get("critic")))
        if command == "create_agent":
            self.agents[a] = AgentLearner(body, self.device, self.parallel)
            return {"trainable_parameters": sum(p.numel() for _, p in self.agents[a].params)}
        agent = self.agents[a]
        if command == "forward_backward":
            out = agent.forward_backward(body["samples"])
            return merge(out, len(body["samples"]))
        if command == "value_forward_backward":
            out = agent.value_forward_backward(body["examples"])
            parts = [out]
            if world()[1] > 1:
                parts = [None] * world()[1]
                dist.all_gather_object(parts, out)
            return {"value_loss": sum(p["value_loss"] for p in parts)}
        if command == "optim_step":
            return agent.optim_step()
        getattr(agent, command)(body["dir"])
        return {}


def merge(local: dict, n: int) -> dict:
    """Sums every process's counters and puts its samples' log-probs in place."""
    _, size = world()
    parts = [local]
    if size > 1:
        parts = [None] * size
        dist.all_gather_object(parts, local)
    out = {k: sum(p[k] for p in parts) for k in ("loss", "entropy_sum", "tokens", "sequences", "clipped", "kl_sum", "kl_tokens")}
    value_loss = None if local["value_loss"] is None else sum(p["value_loss"] for p in parts)
    logprobs = {}
    for p in parts:
        logprobs.update(p["logprobs"])
    return {
        "loss": out["loss"],
        "entropy_sum": out["entropy_sum"],
        "tokens": out["tokens"],
        "sequences": out["sequences"],
        "kl": out["kl_sum"] / out["kl_tokens"] if out["kl_tokens"] else None,
        "clip_fraction": out["clipped"] / out["tokens"] if out["tokens"] else 0.0,
        "value_loss": value_loss,
        "logprobs": [logprobs[i] for i in range(n)],
    }


def execute(learner: Learner, command: str, body: dict) -> dict:
    """Runs a command on every process (rank 0 broadcasts it); returns rank 0's result."""
    _, size = world()
    if size > 1:
        box = [(command, body)]
        dist.broadcast_object_list(box, src=0)
    return learner.run(command, body)


def follow(learner: Learner) -> None:
    """Ranks > 0: execute whatever rank 0 broadcasts until shutdown."""
    while True:
        box = [None]
        dist.broadcast_object_list(box, src=0)
        command, body = box[0]
        if command == "shutdown":
            return
        try:
            learner.run(command, body)
        except Exception:  # rank 0 reports its own copy of the error
            traceback.print_exc()


def serve(listen: str, learner: Learner, max_bytes: int) -> None:
    stop = {"now": False}

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def reply(self, status: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path == "/v1/health":
                self.reply(200, {"ok": True, **execute(learner, "health", {})})
            else:
                self.reply(404, {"ok": False, "error": f"no such path {self.path}; POST /v1/<command>"})

        def do_POST(self):
            command = self.path.removeprefix("/v1/")
            size = int(self.headers.get("content-length") or 0)
            if size > max_bytes:
                self.reply(413, {"ok": False, "error": f"request of {size} bytes exceeds --max-message-mb ({max_bytes} bytes)"})
                return
            try:
                body = json.loads(self.rfile.read(size) or b"{}")
                validate(command, body, learner.agents)
            except (ValueError, RequestError) as e:
                self.reply(400, {"ok": False, "error": f"bad request: {e}"})
                return
            if command == "shutdown":
                stop["now"] = True
                self.reply(200, {"ok": True})
                return
            try:
                result = execute(learner, command, body)
            except Exception as e:
                traceback.print_exc()
                self.reply(500, {"ok": False, "error": f"{type(e).__name__}: {e}"})
                return
            self.reply(200, {"ok": True, **result})

    if listen.startswith("unix:"):
        path = listen[5:]
        if os.path.exists(path):
            os.unlink(path)

        class Server(socketserver.UnixStreamServer):
            def get_request(self):
                conn, _ = super().get_request()
                return conn, ("unix", 0)

        server = Server(path, Handler)
    else:
        from urllib.parse import urlparse

        u = urlparse(listen)
        server = http.server.HTTPServer((u.hostname, u.port), Handler)
    print(f"magrpo-learner: listening on {listen} ({world()[1]} process(es), {learner.device})", file=sys.stderr, flush=True)
    while not stop["now"]:
        server.handle_request()
    server.server_close()
    if world()[1] > 1:
        dist.broadcast_object_list([("shutdown", {})], src=0)
