"""Session 19's usage probes: the issue's families (LLaMA/Qwen, T5, a DenseNet-style CNN, MoE, LSTM/GRU, Swin)
handed over the way practitioners write factories, and the factory-contract corners the CLI flags meet: a
dict with ``dynamic_shapes`` over a padded batch, a cross-entropy with ``ignore_index=-100``, label smoothing and
``reduction="sum"``, a whole-bf16 T5 (for ``--precision bf16-amp`` on top), an ``optimizer`` dict written as
``torch.optim.SGD`` is called (``momentum=0.9`` with ``kind="sgd"``), a DenseNet whose frozen first block keeps
its BatchNorms in eval mode per module (no ``train`` override) and counts its steps in a buffer, an LSTM whose
first layer is frozen inside ``nn.LSTM``, a GRU with inter-layer dropout handed over in ``eval()`` mode, a Swin
with ``gradient_checkpointing_enable()``, and a Qwen2 with tied embeddings, its first block frozen and hand LoRA.
The private ``_bad_*`` factories are user errors on purpose (each must be refused in one line).

Each public function is a factory for ``roam-tvm compare --model benchmarks/outside/kinds_s19_usage.py:<name>``
at a tiny size (random weights and data, seeded).
"""
from __future__ import annotations

import torch
from torch import nn

F = nn.functional
B, T, V, D = 2, 12, 256, 64


def _gen() -> torch.Generator:
    torch.manual_seed(0)
    return torch.Generator().manual_seed(0)


def _quiet():
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()


def _padded(g):
    ids = torch.randint(0, V, (B, T), generator=g)
    mask = torch.ones(B, T, dtype=torch.long)
    mask[1, T - 4:] = 0  # right padding: real zeros in the mask
    labels = ids.masked_fill(mask == 0, -100)
    return ids, mask, labels


class _MaskedLM(nn.Module):
    """The user's wrapper: ``forward(ids, mask) -> logits`` of a Hugging Face causal LM."""

    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, ids, mask):
        return self.hf(input_ids=ids, attention_mask=mask).logits


def _qwen2(**over):
    import transformers as tf

    _quiet()
    torch.manual_seed(0)
    cfg = dict(vocab_size=V, num_hidden_layers=2, hidden_size=D, intermediate_size=96, num_attention_heads=4,
               num_key_value_heads=2, max_position_embeddings=64, attn_implementation="eager",
               tie_word_embeddings=False)
    cfg.update(over)
    return tf.Qwen2ForCausalLM(tf.Qwen2Config(**cfg))


def _llama(**over):
    import transformers as tf

    _quiet()
    torch.manual_seed(0)
    cfg = dict(vocab_size=V, num_hidden_layers=2, hidden_size=D, intermediate_size=96, num_attention_heads=4,
               num_key_value_heads=2, max_position_embeddings=64, attn_implementation="eager")
    cfg.update(over)
    return tf.LlamaForCausalLM(tf.LlamaConfig(**cfg))


# ---------------------------------------------------------------- LLaMA / Qwen
def _shifted_ce_ls_sum(logits, labels):
    """Shifted next-token loss as a trainer writes it: -100 ignored, label smoothing, summed."""
    lg = logits[:, :-1].reshape(-1, logits.shape[-1])
    return F.cross_entropy(lg, labels[:, 1:].reshape(-1), ignore_index=-100, label_smoothing=0.1, reduction="sum")


def qwen2_mask_ls_ignore_sum():
    """Qwen2 with a padded attention_mask, -100 labels, a shifted CE with label_smoothing=0.1 and reduction='sum'."""
    g = _gen()
    ids, mask, labels = _padded(g)
    return _MaskedLM(_qwen2()), (ids, mask), (labels,), _shifted_ce_ls_sum


def llama_dyn_batch():
    """LLaMA dict factory with a padded mask and dynamic_shapes: a batch Dim (max 4) on ids, mask and labels."""
    g = _gen()
    ids, mask, labels = _padded(g)
    b = torch.export.Dim("batch", max=4)
    return {"model": _MaskedLM(_llama()), "example_inputs": (ids, mask), "targets": (labels,),
            "loss": lambda out, y: F.cross_entropy(out.reshape(-1, V), y.reshape(-1), ignore_index=-100),
            "dynamic_shapes": ({0: b}, {0: b}, {0: b}), "optimizer": {"kind": "adamw", "lr": 1e-3,
                                                                    "weight_decay": 0.1}}


def _bad_dyn_targets_static():
    """As llama_dyn_batch but the labels' batch left static (a user slip): inputs tiled to 4, labels at 2."""
    made = llama_dyn_batch()
    b = torch.export.Dim("batch", max=4)
    made["dynamic_shapes"] = ({0: b}, {0: b}, None)
    return made


class _LoRALinear(nn.Module):
    """Hand LoRA on a frozen Linear (peft-free): y = W x + (B A x) * alpha / r."""

    def __init__(self, base: nn.Linear, r=4, alpha=8):
        super().__init__()
        self.base = base
        self.a = nn.Parameter(torch.randn(r, base.in_features) * 0.02)
        self.b = nn.Parameter(torch.randn(base.out_features, r) * 0.02)  # nonzero: a non-trivial first step
        self.scale = alpha / r

    def forward(self, x):
        return self.base(x) + F.linear(F.linear(x, self.a), self.b) * self.scale


def qwen2_tied_lora_partial_frozen():
    """Qwen2, tied embeddings, all base weights frozen but the last block's MLP; LoRA on q/v of every block."""
    m = _qwen2(tie_word_embeddings=True)
    for p in m.parameters():
        p.requires_grad_(False)
    for p in m.model.layers[-1].mlp.parameters():
        p.requires_grad_(True)
    for layer in m.model.layers:
        layer.self_attn.q_proj = _LoRALinear(layer.self_attn.q_proj)
        layer.self_attn.v_proj = _LoRALinear(layer.self_attn.v_proj)
    g = _gen()
    ids, mask, labels = _padded(g)
    return _MaskedLM(m), (ids, mask), (labels,), _shifted_ce_ls_sum


# ---------------------------------------------------------------- T5
class _T5Logits(nn.Module):
    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, ids, mask, dec_ids):
        return self.hf(input_ids=ids, attention_mask=mask, decoder_input_ids=dec_ids).logits


def t5_bf16_model():
    """T5 (relative bias, tied head) already cast with .to(torch.bfloat16); padded encoder mask, -100 labels."""
    import transformers as tf

    _quiet()
    torch.manual_seed(0)
    conf = tf.T5Config(vocab_size=V, d_model=D, d_kv=16, d_ff=96, num_layers=2, num_decoder_layers=2, num_heads=4,
                       dropout_rate=0.0, use_cache=False, decoder_start_token_id=0, pad_token_id=0)
    m = _T5Logits(tf.T5ForConditionalGeneration(conf)).to(torch.bfloat16)
    g = _gen()
    ids, mask, _ = _padded(g)
    dec = torch.randint(1, V, (B, 8), generator=g)
    labels = torch.randint(1, V, (B, 8), generator=g)
    labels[1, 6:] = -100
    return m, (ids, mask, dec), (labels,), \
        lambda out, y: F.cross_entropy(out.float().reshape(-1, V), y.reshape(-1), ignore_index=-100)


# ---------------------------------------------------------------- MoE
class _TopKMoE(nn.Module):
    """Top-2 of 4 experts, dense dispatch through one-hot weights (a Mixtral block as written by hand)."""

    def __init__(self, d=D, experts=4, ffn=96):
        super().__init__()
        self.router = nn.Linear(d, experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(experts, d, ffn) * d ** -0.5)
        self.w2 = nn.Parameter(torch.randn(experts, ffn, d) * ffn ** -0.5)

    def forward(self, x):
        probs = self.router(x).softmax(-1)
        top, idx = probs.topk(2, dim=-1)
        top = top / top.sum(-1, keepdim=True)
        gate = torch.zeros_like(probs).scatter(-1, idx, top)  # [B, T, E]
        h = F.silu(torch.einsum("btd,edf->btef", x, self.w1))
        y = torch.einsum("btef,efd->bted", h, self.w2)
        return (y * gate.unsqueeze(-1)).sum(-2)


class _MoELM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.blocks = nn.ModuleList(nn.ModuleList([nn.LayerNorm(D), _TopKMoE()]) for _ in range(2))
        self.head = nn.Linear(D, V)

    def forward(self, ids):
        x = self.emb(ids)
        for ln, moe in self.blocks:
            x = x + moe(ln(x))
        return self.head(x)


def moe_sgd_momentum_dict():
    """Hand top-2 MoE LM whose optimizer dict reads as torch.optim.SGD(lr=0.1, momentum=0.9) would be written."""
    g = _gen()
    m = _MoELM()
    ids = torch.randint(0, V, (B, T), generator=g)
    return {"model": m, "example_inputs": (ids,), "targets": (torch.randint(0, V, (B, T), generator=g),),
            "optimizer": {"kind": "sgd", "lr": 0.1, "momentum": 0.9}}


# ---------------------------------------------------------------- DenseNet-style CNN
class _Dense(nn.Module):
    def __init__(self, c, growth=8):
        super().__init__()
        self.bn = nn.BatchNorm2d(c)
        self.conv = nn.Conv2d(c, growth, 3, padding=1, bias=False)

    def forward(self, x):
        return torch.cat([x, self.conv(F.relu(self.bn(x)))], 1)


class _DenseNet(nn.Module):
    def __init__(self, classes=5):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.block1 = nn.Sequential(_Dense(16), _Dense(24))
        self.trans = nn.Sequential(nn.BatchNorm2d(32), nn.ReLU(), nn.Conv2d(32, 16, 1, bias=False), nn.AvgPool2d(2))
        self.block2 = nn.Sequential(_Dense(16), _Dense(24))
        self.head = nn.Sequential(nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                  nn.Linear(32, classes))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        if self.training:
            self.steps += 1  # a step counter, as schedulers inside models keep
        return self.head(self.block2(self.trans(self.block1(self.stem(x)))))


def densenet_bn_eval_frozen():
    """DenseNet-style CNN: stem + first dense block frozen with their BatchNorms set .eval() per module (no train()
    override), a step-counter buffer updated in forward."""
    g = _gen()
    m = _DenseNet()
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.5, 0.5)
                mod.running_var.uniform_(0.5, 2.0)
    m.train()
    for part in (m.stem, m.block1):
        part.requires_grad_(False)
        for mod in part.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.eval()  # frozen statistics: the usual fine-tuning recipe
    x = torch.randn(B, 3, 32, 32, generator=g)
    return m, (x,), (torch.randint(0, 5, (B,), generator=g),)


# ---------------------------------------------------------------- LSTM / GRU
class _LSTMTagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, 32)
        self.lstm = nn.LSTM(32, 48, num_layers=2, batch_first=True)
        self.out = nn.Linear(48, 7)

    def forward(self, ids):
        return self.out(self.lstm(self.emb(ids))[0])


def lstm_first_layer_frozen():
    """2-layer nn.LSTM tagger whose layer-0 weights are frozen inside the module (per-parameter requires_grad)."""
    g = _gen()
    m = _LSTMTagger()
    m.emb.weight.requires_grad_(False)
    for n, p in m.lstm.named_parameters():
        if n.endswith("_l0"):
            p.requires_grad_(False)
    ids = torch.randint(0, V, (B, T), generator=g)
    y = torch.randint(0, 7, (B, T), generator=g)
    return m, (ids,), (y,), lambda out, y: F.cross_entropy(out.transpose(1, 2), y)


class _GRUCls(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, 32)
        self.gru = nn.GRU(32, 48, num_layers=2, batch_first=True, dropout=0.3)
        self.drop = nn.Dropout(0.2)
        self.out = nn.Linear(48, 5)

    def forward(self, ids):
        h = self.gru(self.emb(ids))[1][-1]
        return self.out(self.drop(h))


def gru_eval_dropout():
    """2-layer GRU classifier with dropout 0.3 between layers and 0.2 before the head, handed over in eval()."""
    g = _gen()
    m = _GRUCls().eval()
    ids = torch.randint(0, V, (B, T), generator=g)
    return m, (ids,), (torch.randint(0, 5, (B,), generator=g),)


# ---------------------------------------------------------------- Swin
class _SwinLogits(nn.Module):
    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, x):
        return self.hf(pixel_values=x).logits


def swin_grad_ckpt():
    """SwinForImageClassification with gradient_checkpointing_enable() (no drop path), 32 px images."""
    import transformers as tf

    _quiet()
    torch.manual_seed(0)
    g = _gen()
    conf = tf.SwinConfig(image_size=32, patch_size=2, embed_dim=16, depths=[2, 2], num_heads=[2, 4], window_size=4,
                         num_labels=5, drop_path_rate=0.0, hidden_dropout_prob=0.0,
                         attention_probs_dropout_prob=0.0)
    hf = tf.SwinForImageClassification(conf)
    hf.gradient_checkpointing_enable()
    hf.train()
    x = torch.randn(B, 3, 32, 32, generator=g)
    return _SwinLogits(hf), (x,), (torch.randint(0, 5, (B,), generator=g),)


# ---------------------------------------------------------------- bad factories (user errors)
def _bad_kwargs_inputs():
    """User error: example_inputs as a dict of keyword arguments (HF tokenizer output)."""
    g = _gen()
    ids, mask, labels = _padded(g)
    return _MaskedLM(_llama()), {"ids": ids, "mask": mask}, (labels,)


def _bad_torch_optimizer():
    """User error: a torch.optim.AdamW instance as the dict's optimizer."""
    made = llama_dyn_batch()
    made.pop("dynamic_shapes")
    made["optimizer"] = torch.optim.AdamW(made["model"].parameters(), lr=1e-3)
    return made


def _bad_loss_name():
    """User error: a loss name spelled as the torch class (CrossEntropyLoss)."""
    g = _gen()
    return _LSTMTagger(), (torch.randint(0, V, (B, T), generator=g),), (torch.randint(0, 7, (B, T), generator=g),), \
        "CrossEntropyLoss"


def _bad_factory_raises():
    """User error: the factory raises (a missing checkpoint file)."""
    return torch.load("/nonexistent/ckpt.pt")


def _bad_negative_lr():
    """User error: an optimizer dict with a negative lr."""
    g = _gen()
    return {"model": _LSTMTagger(), "example_inputs": (torch.randint(0, V, (B, T), generator=g),),
            "targets": (torch.randint(0, 7, (B, T), generator=g),), "optimizer": {"kind": "adam", "lr": -1e-3}}


def _bad_dim_no_max():
    """User error: a dynamic batch Dim without max."""
    made = llama_dyn_batch()
    b = torch.export.Dim("batch")
    made["dynamic_shapes"] = ({0: b}, {0: b}, {0: b})
    return made
