"""magrpo's PyTorch learner: forward_backward / optim_step / save_adapter / save_state / load_state
for the TypeScript trainer, over HTTP, data parallel under torchrun (learner/README.md)."""

__version__ = "0.1.0"
