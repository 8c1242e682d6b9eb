"""The model registry: ``MODELS``, ``get_model`` and ``load_factory``."""
from __future__ import annotations

import contextlib
from typing import Any, Dict, Optional, Tuple

import torch

from .factory import load_factory  # noqa: F401 - part of the registry's API
from .spec import ModelInfo, ModelSpec, OptimizerConfig, ZooError

# ----------------------------------------------------------------------------------------------------------
# helpers


def _check_positive(name: str, sizes: Dict[str, Any]):
    for key, value in sizes.items():
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ZooError(f"{name}: size {key}={value!r} must be a positive integer")


def _images(gen: torch.Generator, batch: int, image: int, channels: int = 3):
    return torch.randn(batch, channels, image, image, generator=gen, device="cpu")


def _labels(gen: torch.Generator, shape, classes: int, low: int = 0):
    return torch.randint(low, classes, tuple(shape), generator=gen, dtype=torch.int64, device="cpu")


# Default optimizers (the frontend converts them; PyTorch's baseline uses torch_optimizer()).
SGD = OptimizerConfig("sgd", lr=0.01)
MOMENTUM = OptimizerConfig("momentum", lr=0.01, momentum=0.9, weight_decay=1e-4)
ADAMW = OptimizerConfig("adamw", lr=1e-4, weight_decay=0.01)
PAPER_ADAM = OptimizerConfig("adam", lr=0.1, weight_decay=1e-4)

# ----------------------------------------------------------------------------------------------------------
# builders: (sizes, small, gen) -> (model, inputs, targets, loss, optimizer, extra config)


def _build_mlp(s, small, gen):
    from .vision import MLP

    feat, hidden, classes = (32, [16, 16], 4) if small else (784, [1024, 1024], 10)
    model = MLP(feat, hidden, classes)
    x = torch.randn(s["batch"], feat, generator=gen, device="cpu")
    y = _labels(gen, (s["batch"],), classes)
    return model, (x,), (y,), "cross_entropy", SGD, {"in_features": feat, "hidden": hidden, "classes": classes}


def _build_cnn(s, small, gen):
    from .vision import SmallCNN

    if s["image"] % 4:
        raise ZooError(f"cnn: image size {s['image']} must be divisible by 4 (two 2x2 max-pools)")
    width, classes = (4, 4) if small else (16, 10)
    model = SmallCNN(s["image"], 3, width, classes)
    return (model, (_images(gen, s["batch"], s["image"]),), (_labels(gen, (s["batch"],), classes),),
            "cross_entropy", MOMENTUM, {"width": width, "classes": classes})


def _build_resnet18(s, small, gen):
    from .vision import ResNet18

    if not small and s["image"] % 32:
        raise ZooError(f"resnet18: image size {s['image']} must be divisible by 32")
    width, classes = (8, 10) if small else (64, 1000)
    model = ResNet18(classes, width, small_stem=small)
    return (model, (_images(gen, s["batch"], s["image"]),), (_labels(gen, (s["batch"],), classes),),
            "cross_entropy", MOMENTUM, {"width": width, "classes": classes, "small_stem": small})


def _build_resnet50(s, small, gen):
    from .vision import ResNet50

    if not small and s["image"] % 32:
        raise ZooError(f"resnet50: image size {s['image']} must be divisible by 32")
    width, classes = (8, 10) if small else (64, 1000)
    model = ResNet50(classes, width, small_stem=small)
    return (model, (_images(gen, s["batch"], s["image"]),), (_labels(gen, (s["batch"],), classes),),
            "cross_entropy", MOMENTUM, {"width": width, "classes": classes, "small_stem": small})


def _build_vgg11(s, small, gen):
    from .vision import VGG11

    if s["image"] % 32:
        raise ZooError(f"vgg11: image size {s['image']} must be divisible by 32 (five 2x2 max-pools)")
    width_div, hidden, classes = (8, 64, 10) if small else (1, 4096, 1000)
    model = VGG11(s["image"], classes, width_div, hidden)
    return (model, (_images(gen, s["batch"], s["image"]),), (_labels(gen, (s["batch"],), classes),),
            "cross_entropy", MOMENTUM, {"width_div": width_div, "hidden": hidden, "classes": classes})


def _build_mobilenet_v2(s, small, gen):
    from .vision import MobileNetV2

    if s["image"] % 32:
        raise ZooError(f"mobilenet_v2: image size {s['image']} must be divisible by 32")
    width_mult, classes = (0.25, 10) if small else (1.0, 1000)
    model = MobileNetV2(classes, width_mult)
    return (model, (_images(gen, s["batch"], s["image"]),), (_labels(gen, (s["batch"],), classes),),
            "cross_entropy", MOMENTUM, {"width_mult": width_mult, "classes": classes})


def _vit_builder(full: Dict[str, int]):
    def build(s, small, gen):
        from .vision import ViT

        cfg = dict(patch=8, dim=32, depth=2, heads=2, mlp=64, classes=10) if small else dict(full)
        if s["image"] % cfg["patch"]:
            raise ZooError(f"vit: image size {s['image']} is not divisible by the patch size {cfg['patch']}")
        model = ViT(s["image"], cfg["patch"], cfg["dim"], cfg["depth"], cfg["heads"], cfg["mlp"], cfg["classes"])
        return (model, (_images(gen, s["batch"], s["image"]),), (_labels(gen, (s["batch"],), cfg["classes"]),),
                "cross_entropy", ADAMW, cfg)

    return build


def _build_bert(s, small, gen):
    from .text import BertClassifier, bert_config

    cfg = (dict(layers=2, width=64, heads=2, vocab=128, intermediate=128, labels=2, positions=64) if small else
           dict(layers=12, width=768, heads=12, vocab=50265, intermediate=3072, labels=2, positions=512))
    if s["seq"] > cfg["positions"]:
        raise ZooError(f"bert-base: seq {s['seq']} exceeds the {cfg['positions']} position embeddings")
    model = BertClassifier(bert_config(cfg["layers"], cfg["width"], cfg["heads"], cfg["vocab"], cfg["positions"],
                                       cfg["intermediate"], cfg["labels"]))
    # token ids avoid 0..2 (bos / pad / eos) so RoBERTa's padding-aware position ids are plain 2..seq+1
    ids = _labels(gen, (s["batch"], s["seq"]), cfg["vocab"], low=3)
    return model, (ids,), (_labels(gen, (s["batch"],), cfg["labels"]),), "cross_entropy", ADAMW, cfg


GPT2_SIZES = {
    "gpt2-small": dict(layers=12, width=768, heads=12),
    "gpt2-medium": dict(layers=24, width=1024, heads=16),
    "gpt2-xl": dict(layers=48, width=1600, heads=25),
}
GPT2_SMALL_TEST = dict(layers=2, width=64, heads=2, vocab=256, positions=64)


def _gpt2_builder(name: str):
    def build(s, small, gen):
        from .text import GPT2LM, gpt2_config

        cfg = dict(GPT2_SMALL_TEST) if small else dict(GPT2_SIZES[name], vocab=50257, positions=1024)
        if s["seq"] > cfg["positions"]:
            raise ZooError(f"{name}: seq {s['seq']} exceeds the {cfg['positions']} position embeddings")
        model = GPT2LM(gpt2_config(cfg["layers"], cfg["width"], cfg["heads"], cfg["vocab"], cfg["positions"]))
        # next-token language modelling: inputs are tokens[:, :-1], targets tokens[:, 1:]
        tokens = _labels(gen, (s["batch"], s["seq"] + 1), cfg["vocab"])
        return (model, (tokens[:, :-1].contiguous(),), (tokens[:, 1:].contiguous(),), "cross_entropy", ADAMW,
                cfg)

    return build


def _build_gpt2_xl_paper(s, small, gen):
    from .text import GPT2Hidden, gpt2_config

    cfg = dict(GPT2_SMALL_TEST) if small else dict(GPT2_SIZES["gpt2-xl"], vocab=50257, positions=1024)
    if s["seq"] > cfg["positions"]:
        raise ZooError(f"gpt2-xl-paper: seq {s['seq']} exceeds the {cfg['positions']} position embeddings")
    model = GPT2Hidden(gpt2_config(cfg["layers"], cfg["width"], cfg["heads"], cfg["vocab"], cfg["positions"]))
    ids = _labels(gen, (s["batch"], s["seq"]), cfg["vocab"])
    # the hidden state (width C) is read as logits over C classes; every token's target is class 0
    targets = torch.zeros(s["batch"], s["seq"], dtype=torch.int64, device="cpu")
    return model, (ids,), (targets,), "cross_entropy", PAPER_ADAM, cfg


# ----------------------------------------------------------------------------------------------------------
# the registry

_IMG = ("batch", "image")
_TXT = ("batch", "seq")

MODELS: Dict[str, ModelInfo] = {
    "mlp": ModelInfo("3-layer MLP 784-1024-1024-10 on random features (SGD)",
                     {"batch": 64}, {"batch": 4}, False, _build_mlp, ("batch",)),
    "cnn": ModelInfo("small CNN: 2x (conv3x3-batchnorm-relu-maxpool) + linear, 10 classes (SGD momentum)",
                     {"batch": 8, "image": 32}, {"batch": 2, "image": 8}, False, _build_cnn, _IMG),
    "resnet18": ModelInfo("ResNet-18, 1000 classes (SGD momentum); small: width 8, CIFAR stem, 10 classes",
                          {"batch": 8, "image": 224}, {"batch": 2, "image": 32}, False, _build_resnet18, _IMG),
    "resnet50": ModelInfo("ResNet-50 (bottlenecks 3-4-6-3), 1000 classes (SGD momentum); small: width 8, CIFAR "
                          "stem, 10 classes", {"batch": 8, "image": 224}, {"batch": 2, "image": 32}, False,
                          _build_resnet50, _IMG),
    "vgg11": ModelInfo("VGG-11 (config A, no BN, no dropout), 1000 classes (SGD momentum)",
                       {"batch": 8, "image": 224}, {"batch": 2, "image": 32}, False, _build_vgg11, _IMG),
    "mobilenet_v2": ModelInfo("MobileNetV2 (width 1.0), 1000 classes (SGD momentum)",
                              # small at 64: at 32 the last feature map is 1x1 and batch norm over 2 values is
                              # ill-conditioned (float32 vs float64 loss differ by 1.6e-4; at 64 by 1e-7)
                              {"batch": 8, "image": 224}, {"batch": 2, "image": 64}, False, _build_mobilenet_v2,
                              _IMG),
    "vit-tiny": ModelInfo("ViT-Ti/16: width 192, depth 12, 3 heads, 1000 classes (AdamW)",
                          {"batch": 8, "image": 224}, {"batch": 2, "image": 16}, False,
                          _vit_builder(dict(patch=16, dim=192, depth=12, heads=3, mlp=768, classes=1000)), _IMG),
    "vit-b16": ModelInfo("ViT-B/16: width 768, depth 12, 12 heads, 1000 classes (AdamW)",
                         {"batch": 1, "image": 224}, {"batch": 2, "image": 16}, False,
                         _vit_builder(dict(patch=16, dim=768, depth=12, heads=12, mlp=3072, classes=1000)), _IMG),
    "bert-base": ModelInfo("RoBERTa-base-like encoder (12 layers, width 768) + sequence classification, 2 labels "
                           "(AdamW)", {"batch": 8, "seq": 128}, {"batch": 2, "seq": 16}, False, _build_bert, _TXT),
    "gpt2-small": ModelInfo("GPT-2 124M LM (GPT2LMHeadModel, tied head), next-token cross-entropy (AdamW)",
                            {"batch": 1, "seq": 128}, {"batch": 2, "seq": 16}, False, _gpt2_builder("gpt2-small"),
                            _TXT),
    "gpt2-medium": ModelInfo("GPT-2 355M LM (GPT2LMHeadModel), next-token cross-entropy (AdamW)",
                             {"batch": 1, "seq": 256}, {"batch": 2, "seq": 16}, False,
                             _gpt2_builder("gpt2-medium"), _TXT),
    "gpt2-xl": ModelInfo("GPT-2 1.5B LM (GPT2LMHeadModel), next-token cross-entropy (AdamW)",
                         {"batch": 1, "seq": 1024}, {"batch": 2, "seq": 16}, True, _gpt2_builder("gpt2-xl"), _TXT),
    "gpt2-xl-paper": ModelInfo("ROAM paper setup: GPT2Model 1.5B without LM head, hidden state (1600) as logits "
                               "vs all-zero targets, Adam(lr=0.1, weight_decay=1e-4)",
                               {"batch": 1, "seq": 1024}, {"batch": 2, "seq": 16}, True, _build_gpt2_xl_paper,
                               _TXT),
}


def model_names():
    return list(MODELS)


def get_model(name: str, batch: Optional[int] = None, seq: Optional[int] = None, image: Optional[int] = None,
              meta: bool = False, seed: int = 0, small: bool = False) -> ModelSpec:
    """Build a zoo model. ``None`` sizes take the model's default (or its small test size with ``small=True``).

    ``meta=True`` builds the parameters (and buffers) on the ``meta`` device: no storage, so GPT2-XL costs no
    memory. The example inputs and targets are then meta tensors too (same shapes / dtypes), because
    ``torch.export.export(spec.wrapped(), spec.args)`` rejects meta parameters mixed with real CPU inputs
    (``FakeTensorDeviceMismatchError``) but succeeds with all-meta arguments (gpt2-xl-paper, batch 1, seq 1024:
    about 5 s and 450 MiB peak RSS on 2 cores). Shapes and dtypes match ``meta=False``.
    """
    if name not in MODELS:
        raise ZooError(f"unknown model {name!r}; valid models: {', '.join(MODELS)}")
    info = MODELS[name]
    given = {"batch": batch, "seq": seq, "image": image}
    _check_positive(name, given)
    for key, value in given.items():
        if value is not None and key not in info.sizes:
            raise ZooError(f"{name}: size {key!r} does not apply (sizes: {', '.join(info.sizes)})")
    base = info.small_sizes if small else info.defaults
    sizes = {k: (given[k] if given[k] is not None else base[k]) for k in info.sizes}
    gen = torch.Generator().manual_seed(seed)
    ctx = torch.device("meta") if meta else contextlib.nullcontext()
    with _fork_rng(seed):
        with ctx:
            model, inputs, targets, loss, opt, extra = info.builder(sizes, small, gen)
    model.train()
    if meta:
        inputs = tuple(t.to("meta") for t in inputs)
        targets = tuple(t.to("meta") for t in targets)
    config = dict(name=name, **sizes, small=small, meta=meta, seed=seed, **extra)
    return ModelSpec(name=name, model=model, example_inputs=inputs, targets=targets, loss=loss, optimizer=opt,
                     config=config, small=small, meta=meta, description=info.description)


@contextlib.contextmanager
def _fork_rng(seed: int):
    """Seed torch's global RNG for the initialisation, leaving the caller's RNG state untouched."""
    state = torch.get_rng_state()
    torch.manual_seed(seed)
    try:
        yield
    finally:
        torch.set_rng_state(state)


def meta_args(spec: ModelSpec) -> Tuple[torch.Tensor, ...]:
    """``spec.args`` as meta tensors (same shapes and dtypes)."""
    return tuple(a.to("meta") for a in spec.args)
