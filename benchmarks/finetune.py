"""Fine-tuning with frozen parameters: the same model, three sets of trainable parameters.

A GPT-2-style backbone (6 blocks, d=256, 4 heads, vocab 4096, batch 8 x 256 tokens) with a
mean-pooled classification head, Adam. Frozen parameters (``requires_grad=False``) get no
gradient and no optimizer state, and nothing is saved for a backward that would only feed
them, so the step keeps far less than full training::

    roam-tvm compare --model benchmarks/finetune.py:full --optimizer adam \
        --json benchmarks/results/finetune/full.json
    roam-tvm compare --model benchmarks/finetune.py:head_only --optimizer adam ...
    roam-tvm compare --model benchmarks/finetune.py:last_block_and_head --optimizer adam ...

Measured (target cuda, planned, not run; MiB; re-planned 2026-11-27, with attention probabilities
redone in the backward):

    trainable               always live  tvm-default  roam   cut    pytorch (simulated)
    everything                     67.1        369.5  271.2  271.2  462.2
    last block + head              28.4         98.5   72.5   72.5  103.4
    head only                      22.4         46.4   44.4   44.4   58.4

The same model, everything trainable, by precision (``python benchmarks/finetune.py``:
Python API, ``from_torch(..., precision=...)``; MiB)::

    precision            always live  tvm-default  roam   cut
    fp32                        67.1        369.5  271.2  271.2
    bf16 (pure)                 33.5        178.0  139.7  135.7
    bf16-amp                    67.1        309.0  187.3  187.3

AMP keeps fp32 master weights and Adam states (same always-live bytes as fp32); with the
attention probabilities no longer kept and saved activations cast again in the backward
rather than kept in both precisions, its peak is 31% below fp32's.
"""
import torch
from transformers import GPT2Config, GPT2Model


class Classifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        cfg = GPT2Config(vocab_size=4096, n_embd=256, n_layer=6, n_head=4, n_positions=256,
                         resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                         attn_implementation="eager", use_cache=False,
                         bos_token_id=0, eos_token_id=0)
        self.backbone = GPT2Model(cfg)
        self.head = torch.nn.Linear(256, 10)

    def forward(self, ids):
        return self.head(self.backbone(ids).last_hidden_state.mean(1))


def _case(train=None):
    m = Classifier()
    if train is not None:
        for n, p in m.named_parameters():
            p.requires_grad_(n.startswith(train))
    ids = torch.randint(0, 4096, (8, 256))
    return {"model": m, "example_inputs": (ids,), "targets": (torch.randint(0, 10, (8,)),),
            "loss": "cross_entropy"}


def full():
    return _case()


def head_only():
    return _case(("head.",))


def last_block_and_head():
    return _case(("head.", "backbone.h.5.", "backbone.ln_f."))


def _peaks(precision: str) -> dict:
    """Planned peaks (MiB) of ``full()`` in fp32, pure bf16 or bf16-amp (Adam, cuda)."""
    from roam_tvm.frontend import Adam, from_torch
    from roam_tvm.report.compare import compare_step

    spec = full()
    model, kw = spec["model"], {}
    if precision == "bf16":
        model = model.to(torch.bfloat16)
    elif precision != "fp32":
        kw["precision"] = precision
    ts = from_torch(model, spec["example_inputs"], spec["targets"], optimizer=Adam(lr=1e-3),
                    quiet=True, **kw)
    rep = compare_step(ts, planners=("tvm-default", "roam"), target="cuda", progress=False)
    out = {k: round(v["peak_bytes"] / 2**20, 1) for k, v in rep["planners"].items()}
    out["cut"] = round(rep["lower_bounds"]["cut"] / 2**20, 1)
    out["always_live"] = round(rep["always_live_bytes"] / 2**20, 1)
    return out


if __name__ == "__main__":
    for prec in ("fp32", "bf16", "bf16-amp"):
        print(prec, _peaks(prec))
