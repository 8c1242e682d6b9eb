"""Reduced configurations of the realistic family rows, to measure time and memory first.

``python benchmarks/families.py --probe`` runs these (``benchmarks/family_probes.py:<f>_probe``)
before a realistic row: same architecture and width as ``roam_tvm/zoo/families.py``'s
``<f>_realistic``, fewer layers or a smaller batch, so planning time and RSS can be scaled up
before committing the machine to the full row. Each docstring says what is reduced.
"""
from __future__ import annotations

from roam_tvm.zoo import families as fam


def llama_probe():
    """LLaMA at the 1B model's width (2048, 32 heads, 8 KV heads, FFN 5632, vocab 32000), 1 layer, 512 tokens."""
    return fam._lm("llama", 1, 512, **dict(fam._LM_REAL, layers=1))


def t5_probe():
    """T5-base widths (d_model 768, 12 heads, FFN 3072, vocab 32128), 2+2 layers, batch 1, 512/128 tokens."""
    return fam._t5(1, 512, 128, layers=2, width=768, heads=12, ffn=3072, vocab=32128)


def densenet_probe():
    """DenseNet-121 at 224x224, batch 2 (the row is batch 16)."""
    return fam._densenet(2, 224, 1000)


def moe_probe():
    """The small MoE (8 experts, top-2, width 512), 1 layer, 512 tokens (the row: 4 layers, 2,048 tokens)."""
    return fam._moe(1, 512, vocab=32000, width=512, ffn=2048, experts=8, k=2, capacity=512, layers=1)
