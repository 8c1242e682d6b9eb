"""Outside models built from ``transformers`` configs (random weights, no hub): decoder LMs beyond the
LLaMA family, MoE decoders, encoder-decoders, BERT-style encoders, vision backbones, a Whisper
encoder, LLaMA in bf16 and a frozen LLaMA with LoRA adapters.

Each public function is a factory for ``roam-tvm compare --model benchmarks/outside/hf_more.py:<name>``:
it returns ``(model, example_inputs, targets)`` at a tiny size (2 layers, width 32-64, vocab 256,
12 tokens). Eager attention, no dropout, no cache. Random weights and data, seeded.
"""
from __future__ import annotations

import torch
from torch import nn

from roam_tvm.zoo.families import CausalLM, _gen, _quiet, _tokens

BATCH, SEQ, VOCAB = 2, 12, 256
_DROP0 = dict(attention_dropout=0.0, use_cache=False, tie_word_embeddings=False,
              attn_implementation="eager")


def _lm(model: nn.Module, vocab: int = VOCAB):
    gen = _gen()
    return model, (_tokens(gen, BATCH, SEQ, vocab),), (_tokens(gen, BATCH, SEQ, vocab),)


def _causal(name: str, model: str | None = None, **cfg):
    """``<name>Config(**cfg)`` -> ``<name>ForCausalLM`` (or ``model``) wrapped to return the logits."""
    import transformers as tf

    _quiet()
    torch.manual_seed(0)
    conf = getattr(tf, f"{name}Config")(vocab_size=VOCAB, num_hidden_layers=2, **cfg)
    return _lm(CausalLM(getattr(tf, model or f"{name}ForCausalLM")(conf)))


_LLAMA_LIKE = dict(hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2,
                   max_position_embeddings=64, **_DROP0)


# decoder-only language models
def gpt_neox():
    """GPT-NeoX (parallel attention + MLP residual, partial rotary, fused qkv), hidden 64."""
    return _causal("GPTNeoX", hidden_size=64, intermediate_size=128, num_attention_heads=4,
                   rotary_pct=0.25, max_position_embeddings=64, hidden_dropout=0.0, **_DROP0)


def falcon():
    """Falcon (multi-query attention, parallel attention + MLP, new decoder arch off), hidden 64."""
    return _causal("Falcon", hidden_size=64, num_attention_heads=4, hidden_dropout=0.0, alibi=False,
                   new_decoder_architecture=False, multi_query=True, parallel_attn=True, bias=False,
                   **_DROP0)


def phi():
    """Phi (partial rotary, parallel block, gelu_new, dense q/k/v with biases), hidden 64."""
    return _causal("Phi", hidden_size=64, intermediate_size=128, num_attention_heads=4,
                   partial_rotary_factor=0.5, max_position_embeddings=64, resid_pdrop=0.0,
                   embd_pdrop=0.0, **_DROP0)


def phi3():
    """Phi-3 (fused qkv and gate_up projections, RMSNorm, SiLU gating), hidden 64."""
    return _causal("Phi3", hidden_size=64, intermediate_size=96, num_attention_heads=4,
                   num_key_value_heads=2, max_position_embeddings=64, original_max_position_embeddings=64,
                   resid_pdrop=0.0, embd_pdrop=0.0, pad_token_id=0, **_DROP0)


def gemma():
    """Gemma (scaled embedding, (1 + w) RMSNorm, GeGLU with tanh GELU, head_dim 16), hidden 64."""
    return _causal("Gemma", head_dim=16, hidden_act="gelu_pytorch_tanh", **_LLAMA_LIKE)


def gemma2():
    """Gemma-2 (pre/post norms, logit soft-capping, sliding + global layers), hidden 64."""
    return _causal("Gemma2", head_dim=16, sliding_window=8, query_pre_attn_scalar=16, **_LLAMA_LIKE)


def stablelm():
    """StableLM (LayerNorm, partial rotary 25%), hidden 64."""
    return _causal("StableLm", partial_rotary_factor=0.25, hidden_dropout=0.0, **_LLAMA_LIKE)


def olmo():
    """OLMo (non-parametric LayerNorm, no biases), hidden 64."""
    return _causal("Olmo", **_LLAMA_LIKE)


def olmo2():
    """OLMo-2 (RMSNorm after attention / MLP, q/k norms), hidden 64."""
    return _causal("Olmo2", **_LLAMA_LIKE)


def granite():
    """Granite (LLaMA with embedding / residual / attention / logit multipliers), hidden 64."""
    return _causal("Granite", embedding_multiplier=12.0, residual_multiplier=0.22, attention_multiplier=0.0625,
                   logits_scaling=8.0, **_LLAMA_LIKE)


def qwen3():
    """Qwen3 (q/k RMSNorm per head), hidden 64."""
    return _causal("Qwen3", head_dim=16, **_LLAMA_LIKE)


def gemma3():
    """Gemma-3 text model (q/k norms, local + global layers with their own RoPE), hidden 64."""
    return _causal("Gemma3Text", "Gemma3ForCausalLM", head_dim=16, sliding_window=8, query_pre_attn_scalar=16,
                   layer_types=["sliding_attention", "full_attention"], **_LLAMA_LIKE)


def cohere():
    """Cohere (LayerNorm without bias, parallel block, logit scale, interleaved RoPE), hidden 64."""
    return _causal("Cohere", logit_scale=0.25, **_LLAMA_LIKE)


def gptj():
    """GPT-J (parallel block, interleaved partial rotary on 8 of 16 dims), hidden 64."""
    return _causal("GPTJ", n_embd=64, n_head=4, rotary_dim=8, n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0,
                   attn_pdrop=0.0, use_cache=False, tie_word_embeddings=False, attn_implementation="eager")


def opt():
    """OPT (learned positions offset by 2, ReLU MLP, pre-LayerNorm), hidden 64."""
    return _causal("OPT", hidden_size=64, ffn_dim=96, num_attention_heads=4, word_embed_proj_dim=64,
                   max_position_embeddings=64, dropout=0.0, activation_dropout=0.0, **_DROP0)


def qwen2_moe():
    """Qwen2-MoE (4 routed experts top-2 + a gated shared expert), hidden 64."""
    return _causal("Qwen2Moe", num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                   shared_expert_intermediate_size=64, decoder_sparse_step=1, **_LLAMA_LIKE)


def mixtral():
    """Mixtral (4 experts, top-2 routing, SiLU-gated experts), hidden 64."""
    return _causal("Mixtral", num_local_experts=4, num_experts_per_tok=2, **_LLAMA_LIKE)


# LLaMA in bf16, and a frozen LLaMA with LoRA adapters
def llama_bf16():
    """LLaMA, hidden 64, the whole model in bfloat16 (``model.to(torch.bfloat16)``)."""
    model, ins, tgt = _causal("Llama", **_LLAMA_LIKE)
    return model.to(torch.bfloat16), ins, tgt


def llama():
    """LLaMA, hidden 64 in fp32 (the model of the ``--precision`` probes)."""
    return _causal("Llama", **_LLAMA_LIKE)


def llama_sdpa():
    """LLaMA, hidden 64, with transformers' default attention (SDPA) instead of eager."""
    cfg = {k: v for k, v in _LLAMA_LIKE.items() if k != "attn_implementation"}
    return _causal("Llama", **cfg)


def bert_cls_defaults():
    """BERT sequence classification as a user writes it: default dropouts (0.1) and attention (SDPA)."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.BertConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=96, max_position_embeddings=64, num_labels=3)
    model = Logits(tf.BertForSequenceClassification(conf))
    return model, (_tokens(gen, BATCH, SEQ, VOCAB),), (torch.randint(0, 3, (BATCH,), generator=gen),)


class LoRALinear(nn.Module):
    """``base(x) + (x A^T) B^T * scale``: the frozen base linear plus a trainable rank-``r`` update."""

    def __init__(self, base: nn.Linear, r: int = 4, alpha: float = 8.0):
        super().__init__()
        self.base = base
        self.a = nn.Parameter(torch.randn(r, base.in_features) * 0.02)
        self.b = nn.Parameter(torch.zeros(base.out_features, r))
        self.scale = alpha / r

    def forward(self, x):
        return self.base(x) + (x @ self.a.t()) @ self.b.t() * self.scale


def llama_lora():
    """LLaMA, hidden 64, every parameter frozen but rank-4 LoRA adapters on q_proj and v_proj."""
    model, ins, tgt = _causal("Llama", **_LLAMA_LIKE)
    return _add_lora(model), ins, tgt


def _add_lora(model):
    for p in model.parameters():
        p.requires_grad_(False)
    for layer in model.hf.model.layers:
        layer.self_attn.q_proj = LoRALinear(layer.self_attn.q_proj)
        layer.self_attn.v_proj = LoRALinear(layer.self_attn.v_proj)
    return model


def llama_lora_medium():
    """LoRA (rank 4 on q_proj, v_proj) on a frozen LLaMA of 4 layers, width 512, 2 x 256 tokens, vocab 8192."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.LlamaConfig(vocab_size=8192, num_hidden_layers=4, **dict(_LLAMA_LIKE, hidden_size=512,
                          intermediate_size=1376, num_attention_heads=8, num_key_value_heads=4,
                          max_position_embeddings=512))
    model = CausalLM(tf.LlamaForCausalLM(conf))
    _add_lora(model)
    return model, (_tokens(gen, 2, 256, 8192),), (_tokens(gen, 2, 256, 8192),)


# encoder-decoders
class Seq2SeqLM(nn.Module):
    """An encoder-decoder: ``forward(input_ids, decoder_input_ids)`` -> the decoder's logits."""

    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, input_ids, decoder_input_ids):
        return self.hf(input_ids=input_ids, decoder_input_ids=decoder_input_ids, use_cache=False).logits


def _seq2seq(cfg_name: str, model_name: str, **cfg):
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = getattr(tf, cfg_name)(vocab_size=VOCAB, **cfg)
    model = Seq2SeqLM(getattr(tf, model_name)(conf))
    ins = (_tokens(gen, BATCH, SEQ, VOCAB), _tokens(gen, BATCH, SEQ - 4, VOCAB))
    return model, ins, (_tokens(gen, BATCH, SEQ - 4, VOCAB),)


_BART_LIKE = dict(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                  decoder_attention_heads=4, encoder_ffn_dim=96, decoder_ffn_dim=96, dropout=0.0,
                  attention_dropout=0.0, activation_dropout=0.0, max_position_embeddings=64, use_cache=False,
                  pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2,
                  attn_implementation="eager")


def bart():
    """BART (learned positions offset by 2, LayerNorm after embeddings), 2+2 layers, d_model 64."""
    return _seq2seq("BartConfig", "BartForConditionalGeneration", **_BART_LIKE)


def pegasus():
    """Pegasus (sinusoidal positions, pre-LayerNorm), 2+2 layers, d_model 64."""
    return _seq2seq("PegasusConfig", "PegasusForConditionalGeneration", **_BART_LIKE)


def marian():
    """Marian MT (sinusoidal positions, scaled embeddings, final-logits bias), 2+2 layers, d_model 64."""
    return _seq2seq("MarianConfig", "MarianMTModel", **dict(_BART_LIKE, pad_token_id=1, decoder_start_token_id=1))


_T5_LIKE = dict(d_model=64, d_kv=16, d_ff=96, num_layers=2, num_heads=4, dropout_rate=0.0, use_cache=False,
                relative_attention_num_buckets=8, feed_forward_proj="gated-gelu", attn_implementation="eager")


def mt5():
    """mT5 (gated-GELU T5 with untied head), 2+2 layers, d_model 64."""
    return _seq2seq("MT5Config", "MT5ForConditionalGeneration", **_T5_LIKE)


def umt5():
    """UMT5 (a relative position bias per layer), 2+2 layers, d_model 64."""
    return _seq2seq("UMT5Config", "UMT5ForConditionalGeneration", **_T5_LIKE)


# BERT-style encoders
class Logits(nn.Module):
    """A Hugging Face model called with its one input by name (``input_ids``, ``pixel_values``,
    ``input_features``): ``forward(x)`` -> the output's ``.logits``."""

    def __init__(self, hf, key: str = "input_ids"):
        super().__init__()
        self.hf, self.key = hf, key

    def forward(self, x):
        return self.hf(**{self.key: x}).logits


def _encoder(cfg_name: str, model_name: str, classes: int | None, **cfg):
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = getattr(tf, cfg_name)(vocab_size=VOCAB, attn_implementation="eager", **cfg)
    model = Logits(getattr(tf, model_name)(conf))
    ins = (_tokens(gen, BATCH, SEQ, VOCAB),)
    tgt = _tokens(gen, BATCH, SEQ, VOCAB) if classes is None else torch.randint(0, classes, (BATCH,), generator=gen)
    return model, ins, (tgt,)


_BERT_LIKE = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=96,
                  max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def bert_mlm():
    """BERT masked LM (token types, tied decoder, prediction-head transform), 2 layers, hidden 64."""
    return _encoder("BertConfig", "BertForMaskedLM", None, **_BERT_LIKE)


def albert_mlm():
    """ALBERT masked LM (factorised 32-wide embedding, one layer's weights shared by both layers)."""
    return _encoder("AlbertConfig", "AlbertForMaskedLM", None, embedding_size=32, **_BERT_LIKE)


def electra_mlm():
    """ELECTRA generator masked LM (embedding projection 32 -> 64, GELU head), 2 layers, hidden 64."""
    return _encoder("ElectraConfig", "ElectraForMaskedLM", None, embedding_size=32, **_BERT_LIKE)


def roberta_cls():
    """RoBERTa sequence classification (first-token head, padding-offset positions), 3 labels."""
    return _encoder("RobertaConfig", "RobertaForSequenceClassification", 3, num_labels=3, pad_token_id=1,
                    classifier_dropout=0.0, **_BERT_LIKE)


def distilbert_cls():
    """DistilBERT sequence classification (pre-classifier + ReLU on the first token), 3 labels."""
    return _encoder("DistilBertConfig", "DistilBertForSequenceClassification", 3, num_labels=3, dim=64,
                    n_layers=2, n_heads=4, hidden_dim=96, max_position_embeddings=64, dropout=0.0,
                    attention_dropout=0.0, seq_classif_dropout=0.0)


# vision
def _vision(cfg_name: str, model_name: str, image: int = 32, classes: int = 5, **cfg):
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = getattr(tf, cfg_name)(num_labels=classes, **cfg)
    model = Logits(getattr(tf, model_name)(conf), "pixel_values")
    x = torch.randn(BATCH, 3, image, image, generator=gen)
    return model, (x,), (torch.randint(0, classes, (BATCH,), generator=gen),)


_VIT_LIKE = dict(image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=96, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                 attn_implementation="eager")


def vit():
    """ViT (CLS token, learned positions), 32x32 images in 8x8 patches, hidden 64."""
    return _vision("ViTConfig", "ViTForImageClassification", **_VIT_LIKE)


def deit():
    """DeiT with distillation token (two heads averaged), 32x32 images, hidden 64."""
    return _vision("DeiTConfig", "DeiTForImageClassificationWithTeacher", **_VIT_LIKE)


def beit():
    """BEiT (relative position bias, layer scale, mean-pooled head), 32x32 images, hidden 64."""
    return _vision("BeitConfig", "BeitForImageClassification", use_relative_position_bias=True,
                   use_mean_pooling=True, layer_scale_init_value=0.1, drop_path_rate=0.0, **_VIT_LIKE)


def convnextv2():
    """ConvNeXt-V2 (depthwise 7x7, channels-last LayerNorm, global response norm), 32x32 images."""
    return _vision("ConvNextV2Config", "ConvNextV2ForImageClassification", hidden_sizes=[16, 32],
                   depths=[1, 1], num_stages=2, patch_size=2, drop_path_rate=0.0)


def regnet():
    """RegNet-Y (grouped 3x3 convs, squeeze-excitation), 32x32 images."""
    return _vision("RegNetConfig", "RegNetForImageClassification", embedding_size=16, hidden_sizes=[16, 32],
                   depths=[1, 1], groups_width=8, layer_type="y")


def resnet_hf():
    """ResNet from transformers (bottleneck blocks, BatchNorm), 32x32 images."""
    return _vision("ResNetConfig", "ResNetForImageClassification", embedding_size=16, hidden_sizes=[16, 32],
                   depths=[1, 1], layer_type="bottleneck")


# audio
def whisper_enc():
    """Whisper encoder + classifier head (two-conv1d stem, sinusoidal positions), 8 mel bins x 32 frames."""
    import transformers as tf

    _quiet()
    gen = _gen()
    conf = tf.WhisperConfig(num_mel_bins=8, d_model=64, encoder_layers=2, encoder_attention_heads=4,
                            encoder_ffn_dim=96, decoder_layers=1, decoder_attention_heads=4, decoder_ffn_dim=96,
                            max_source_positions=16, vocab_size=VOCAB, dropout=0.0, attention_dropout=0.0,
                            activation_dropout=0.0, num_labels=4, attn_implementation="eager")
    model = Logits(tf.WhisperForAudioClassification(conf), "input_features")
    x = torch.randn(BATCH, 8, 32, generator=gen)
    return model, (x,), (torch.randint(0, 4, (BATCH,), generator=gen),)
