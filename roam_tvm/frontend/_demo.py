"""Tiny example: build ``train_step`` for an MLP and a tiny GPT-2 with Adam.

    python -m roam_tvm.frontend._demo            # prints signatures and op counts
    python -m roam_tvm.frontend._demo --run      # also builds for llvm and runs one step

``demo_mlp()`` / ``demo_gpt2()`` return ``(ts, model, inputs, targets)``.
"""

from __future__ import annotations

import sys


def demo_mlp(batch=8, optimizer=None):
    import torch

    from roam_tvm.frontend import Adam, from_torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    x = torch.randn(batch, 32)
    y = torch.randint(0, 10, (batch,))
    ts = from_torch(model, (x,), (y,), loss="cross_entropy",
                    optimizer=optimizer or Adam(lr=1e-3))
    return ts, model, (x,), (y,)


def tiny_gpt2(vocab=64, n_embd=32, n_layer=2, n_head=2, n_positions=64, lm_head=True):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, GPT2Model

    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=vocab, n_embd=n_embd, n_layer=n_layer, n_head=n_head,
                     n_positions=n_positions, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                     attn_implementation="eager")
    return (GPT2LMHeadModel if lm_head else GPT2Model)(cfg)


def demo_gpt2(batch=2, seq=16, optimizer=None):
    import torch

    from roam_tvm.frontend import Adam, from_torch

    model = tiny_gpt2()
    ids = torch.randint(0, model.config.vocab_size, (batch, seq))
    tgt = torch.randint(0, model.config.vocab_size, (batch, seq))
    ts = from_torch(model, (ids,), (tgt,), loss="cross_entropy",
                    optimizer=optimizer or Adam(lr=1e-3))
    return ts, model, (ids,), (tgt,)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    for name, fn in (("mlp", demo_mlp), ("gpt2-tiny", demo_gpt2)):
        ts, model, ins, tgs = fn()
        f = ts.mod["train_step"]
        nb = sum(len(b.bindings) for b in f.body.blocks)
        print(f"{name}: {len(ts.param_names)} params, {len(ts.state_names)} states, "
              f"{nb} bindings; signature head {ts.signature[:4]}")
        if "--run" in argv:
            import tvm
            from tvm import relax

            ex = tvm.compile(ts.mod, target="llvm")
            vm = relax.VirtualMachine(ex, tvm.cpu())
            state = ts.initial_values()
            for step in range(3):
                loss = ts.run(vm, [t.numpy() for t in ins], [t.numpy() for t in tgs], state)
                print(f"  step {step + 1}: loss {loss:.5f}")


if __name__ == "__main__":
    main()
