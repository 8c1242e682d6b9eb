"""Outside models of ``transformers`` text families no earlier probe file covers (round 20), random weights, no hub:
decoders (InternLM3 built through ``AutoModelForCausalLM.from_config`` as a LLaMA with q/k/v/o and MLP biases,
HyperCLOVA X with MuP multipliers and peri-layer norms, Kolibri-1 MoE with sliding-window layers, the Step-3.5 text
decoder with gated heads and clamped SwiGLU, Granite-SWA with per-layer rope thetas), the text decoders of
vision-language models fed by hand (Qwen2-VL, Qwen3-VL and GLM-4V with 3-axis M-RoPE position ids, Qwen3-VL with
deepstack visual features added at masked positions, Mllama with a cross-attention layer on a random vision state,
Emu3), encoder-decoders (T5Gemma 2 with its boolean-mask eoi embedding write, PLBart), encoders (EmbeddingGemma 2
mean-pooled, also at its config's 512-wide global head dim; GTE, Data2Vec-Text as a causal LM,
RoBERTa-PreLayerNorm, RoCBert with shape / pronunciation ids, UltraBERT, TAPAS with its per-cell positions from a
segmented scatter_reduce min and with absolute positions) and contrastive text towers trained on their pooled /
projected output (CLIP, SigLIP, X-CLIP).

Each public function is a factory for ``roam-tvm compare --model benchmarks/outside/kinds_s20_text.py:<name>``
at the size of hf_more.py (2 layers, hidden 64, vocab 256, 12 tokens, batch 2; MoE cut to 4 experts). Eager
attention, no dropout, no cache, seeded.
"""
from __future__ import annotations

import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # hf_more's wrappers
from hf_more import (_BART_LIKE, _DROP0, _LLAMA_LIKE, BATCH, SEQ, VOCAB, CausalLM, Logits,  # noqa: E402
                     _causal, _encoder, _lm, _seq2seq)
from roam_tvm.zoo.families import _gen, _quiet, _tokens  # noqa: E402

_MOE_SMALL = dict(moe_intermediate_size=32, num_experts_per_tok=2)
_BERT_LIKE = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=96,
                  max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def _tf():
    import transformers as tf

    _quiet()
    torch.manual_seed(0)
    return tf


class _Head(nn.Module):
    """A bare ``...TextModel`` plus an untied LM head: ``forward(input_ids)`` -> logits; fixed extra keyword
    inputs (``position_ids``, a vision state) are buffers handed to the model on every call."""

    def __init__(self, body, hidden: int = 64, vocab: int = VOCAB, **extra):
        super().__init__()
        self.body = body
        self.head = nn.Linear(hidden, vocab, bias=False)
        self._names = list(extra)
        for k, v in extra.items():
            self.register_buffer(k, v, persistent=False)

    def forward(self, input_ids):
        kw = {k: getattr(self, k) for k in self._names}
        return self.head(self.body(input_ids=input_ids, use_cache=False, **kw).last_hidden_state)


def _mrope_positions(rows: int = 3) -> torch.Tensor:
    """``[rows, B, T]`` M-RoPE ids: text positions around a 2x2 'image' at tokens 2..5 (t fixed, h / w walk the
    grid), as Qwen2-VL's get_rope_index lays them out; a 4th leading row (Qwen3-VL) is the plain text position."""
    t = [0, 1, 2, 2, 2, 2, 4, 5, 6, 7, 8, 9]
    h = [0, 1, 2, 2, 3, 3, 4, 5, 6, 7, 8, 9]
    w = [0, 1, 2, 3, 2, 3, 4, 5, 6, 7, 8, 9]
    ids = torch.tensor([t, h, w])[:, None, :].expand(3, BATCH, SEQ)
    if rows == 4:
        ids = torch.cat([torch.arange(SEQ).view(1, 1, SEQ).expand(1, BATCH, SEQ), ids])
    return ids.contiguous()


# dense and MoE decoders
def internlm3():
    """InternLM3 via AutoModelForCausalLM.from_config (LLaMA with q/k/v/o and MLP biases, GQA), hidden 64."""
    tf = _tf()
    conf = tf.InternLM3Config(vocab_size=VOCAB, num_hidden_layers=2, head_dim=16, qkv_bias=True, bias=True,
                              pad_token_id=0, **_LLAMA_LIKE)
    return _lm(CausalLM(tf.AutoModelForCausalLM.from_config(conf)))


def hyperclovax():
    """HyperCLOVA X (MuP embedding / residual / attention / logit multipliers, peri-layer post-norms), hidden 64."""
    return _causal("HyperCLOVAX", head_dim=16, embedding_multiplier=2.0, residual_multiplier=0.5,
                   attention_multiplier=0.1, logits_scaling=0.5, use_post_norm=True, **_LLAMA_LIKE)


def kolibri1():
    """Kolibri-1 (4 experts top-2 plus a shared expert, sliding-window 4 / full layers), hidden 64."""
    return _causal("Kolibri1", head_dim=16, num_experts=4, shared_expert_intermediate_size=32, sliding_window=4,
                   layer_types=["sliding_attention", "full_attention"], **_MOE_SMALL,
                   **{k: v for k, v in _LLAMA_LIKE.items() if k != "intermediate_size"})


def step3p5_text():
    """Step-3.5 text decoder (sigmoid-gated heads, sliding layer with its own head count, a dense then a 4-expert
    top-2 MoE layer with shared expert, clamped SwiGLU), bare model + LM head, hidden 64."""
    tf = _tf()
    conf = tf.Step3p7TextConfig(vocab_size=VOCAB, num_hidden_layers=2, head_dim=16, n_routed_experts=4,
                                share_expert_dim=32, sliding_window=4, num_sliding_attention_heads=2,
                                layer_types=["sliding_attention", "full_attention"],
                                mlp_layer_types=["dense", "sparse"], swiglu_limits=[None, 7.0],
                                swiglu_limits_shared=[None, 7.0], pad_token_id=0, **_MOE_SMALL, **_LLAMA_LIKE)
    return _lm(_Head(tf.Step3p7TextModel(conf)))


def granite_swa():
    """Granite-SWA (sliding-window 4 / full layers with per-layer rope thetas, MuP multipliers), hidden 64."""
    return _causal("GraniteSWA", sliding_window=4, layer_types=["sliding_attention", "full_attention"],
                   layer_rope_theta=[10000.0, 500000.0], embedding_multiplier=4.0, residual_multiplier=0.25,
                   attention_multiplier=0.0625, logits_scaling=2.0, **_LLAMA_LIKE)


# text decoders of vision-language models
def qwen2_vl_text():
    """Qwen2-VL text decoder (3-axis M-RoPE over t/h/w position ids for a 2x2 image block, qkv biases)."""
    tf = _tf()
    conf = tf.Qwen2VLTextConfig(vocab_size=VOCAB, num_hidden_layers=2,
                                rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                 "mrope_section": [2, 3, 3]}, **_LLAMA_LIKE)
    return _lm(_Head(tf.Qwen2VLTextModel(conf), position_ids=_mrope_positions()))


def qwen3_vl_text():
    """Qwen3-VL text decoder (interleaved M-RoPE, q/k norms, a text-position row ahead of t/h/w), hidden 64."""
    tf = _tf()
    conf = tf.Qwen3VLTextConfig(vocab_size=VOCAB, num_hidden_layers=2, head_dim=16,
                                rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                 "mrope_section": [2, 3, 3], "mrope_interleaved": True},
                                **_LLAMA_LIKE)
    return _lm(_Head(tf.Qwen3VLTextModel(conf), position_ids=_mrope_positions(4)))


def qwen3_vl_deepstack():
    """Qwen3-VL text decoder with deepstack: random visual features added in place at 4 masked token positions
    after each of the 2 layers (masked index_put on the hidden state)."""
    tf = _tf()
    conf = tf.Qwen3VLTextConfig(vocab_size=VOCAB, num_hidden_layers=2, head_dim=16,
                                rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                 "mrope_section": [2, 3, 3], "mrope_interleaved": True},
                                **_LLAMA_LIKE)
    mask = torch.zeros(BATCH, SEQ, dtype=torch.bool)
    mask[:, 2:6] = True
    gen = _gen()
    feats = torch.randn(2, BATCH * 4, 64, generator=gen)

    class _Deep(_Head):
        def forward(self, input_ids):
            out = self.body(input_ids=input_ids, use_cache=False, position_ids=self.position_ids,
                            visual_pos_masks=self.visual_pos_masks,
                            deepstack_visual_embeds=[self.deep[0], self.deep[1]])
            return self.head(out.last_hidden_state)

    model = _Deep(tf.Qwen3VLTextModel(conf), position_ids=_mrope_positions(4), visual_pos_masks=mask, deep=feats)
    return _lm(model)


def glm4v_text():
    """GLM-4V text decoder (M-RoPE, sandwich post-attention / post-MLP norms, fused gate_up MLP), hidden 64."""
    tf = _tf()
    conf = tf.Glm4vTextConfig(vocab_size=VOCAB, num_hidden_layers=2,
                              rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                               "mrope_section": [2, 3, 3], "partial_rotary_factor": 1.0},
                              **{k: v for k, v in _LLAMA_LIKE.items() if k != "tie_word_embeddings"})
    return _lm(_Head(tf.Glm4vTextModel(conf), position_ids=_mrope_positions()))


class _CrossLM(nn.Module):
    """Mllama's causal LM with a (non-trainable) vision state for its cross-attention layers."""

    def __init__(self, hf, vision):
        super().__init__()
        self.hf = hf
        self.register_buffer("vision", vision, persistent=False)

    def forward(self, input_ids):
        return self.hf(input_ids=input_ids, cross_attention_states=self.vision, use_cache=False).logits


def mllama_text():
    """Mllama text decoder (layer 1 a gated cross-attention layer over a random 2x16 vision state, tanh gates)."""
    tf = _tf()
    conf = tf.MllamaTextConfig(vocab_size=VOCAB, num_hidden_layers=2, cross_attention_layers=[1], pad_token_id=0,
                               **{k: v for k, v in _LLAMA_LIKE.items() if k != "attention_dropout"})
    hf = tf.MllamaForCausalLM(conf)
    with torch.no_grad():  # the tanh gates start at 0: open them so the cross-attention path carries gradient
        for layer in hf.model.layers:
            for g in ("cross_attn_attn_gate", "cross_attn_mlp_gate"):
                if hasattr(layer, g):
                    getattr(layer, g).fill_(0.5)
    gen = _gen()
    vision = torch.randn(BATCH, 16, 64, generator=gen)
    return _lm(_CrossLM(hf, vision))


def emu3_text():
    """Emu3 text decoder (LLaMA-like with attention dropout off, untied head), hidden 64."""
    return _causal("Emu3Text", model="Emu3ForCausalLM", pad_token_id=0, **_LLAMA_LIKE)


# encoder-decoders
class _EncDecLogits(nn.Module):
    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, input_ids, decoder_input_ids):
        return self.hf(input_ids=input_ids, decoder_input_ids=decoder_input_ids, use_cache=False).logits


def t5gemma2():
    """T5Gemma 2 (Gemma-3 encoder-decoder: merged self+cross attention in the decoder, q/k norms, sliding /
    global layers, tied embeddings), 2+2 layers, hidden 64."""
    tf = _tf()
    side = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, head_dim=16, max_position_embeddings=64, attention_dropout=0.0,
                dropout_rate=0.0, sliding_window=4, layer_types=["sliding_attention", "full_attention"],
                query_pre_attn_scalar=16)
    vision = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=1, num_attention_heads=2, image_size=32,
                  patch_size=16)
    conf = tf.T5Gemma2Config(encoder=dict(text_config=side, vision_config=vision, mm_tokens_per_image=4,
                                          boi_token_index=250, eoi_token_index=251, image_token_index=252),
                             decoder=dict(side), dropout_rate=0.0, attention_dropout=0.0, use_cache=False,
                             attn_implementation="eager")
    gen = _gen()
    ins = (_tokens(gen, BATCH, SEQ, 240), _tokens(gen, BATCH, SEQ - 4, 240))
    return _EncDecLogits(tf.T5Gemma2ForConditionalGeneration(conf)), ins, (_tokens(gen, BATCH, SEQ - 4, VOCAB),)


def plbart():
    """PLBart (BART with a scaled embedding and LayerNorm after embeddings, language-code start tokens)."""
    return _seq2seq("PLBartConfig", "PLBartForConditionalGeneration", scale_embedding=True, **_BART_LIKE)


# encoders
class _Pooled(nn.Module):
    """A text encoder trained on its pooled / projected sentence vector: ``forward(ids)`` -> ``out.<key>``."""

    def __init__(self, hf, key: str, **kw):
        super().__init__()
        self.hf, self.key, self.kw = hf, key, kw

    def forward(self, input_ids):
        return getattr(self.hf(input_ids=input_ids, **self.kw), self.key)


def _pooled(hf, key: str, dim: int, **kw):
    gen = _gen()
    return {"model": _Pooled(hf, key, **kw), "example_inputs": (_tokens(gen, BATCH, SEQ, VOCAB),),
            "targets": (torch.randn(BATCH, dim, generator=gen),), "loss": "mse"}


class _MeanPool(nn.Module):
    """Per-token embeddings mean-pooled over the sequence and L2-normalised (a sentence embedding)."""

    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, input_ids):
        return nn.functional.normalize(self.hf(input_ids=input_ids).last_hidden_state.mean(1), dim=-1)


def embedding_gemma2_text():
    """EmbeddingGemma 2 text tower (bidirectional sliding / full layers, the full layer with head dim 32 and one
    kv head, projection-only per-layer inputs gating each layer, per-token projection to 32), mean-pooled and
    L2-normalised, MSE on the sentence embedding."""
    tf = _tf()
    conf = tf.EmbeddingGemma2TextConfig(vocab_size=VOCAB, num_hidden_layers=2, head_dim=16, sliding_window=4,
                                        layer_types=["sliding_attention", "full_attention"], embedding_dim=32,
                                        hidden_size_per_layer_input=16, global_head_dim=32,
                                        num_global_key_value_heads=1,
                                        **{k: v for k, v in _LLAMA_LIKE.items()
                                           if k not in ("tie_word_embeddings", "use_cache")})
    gen = _gen()
    return {"model": _MeanPool(tf.EmbeddingGemma2TextModel(conf)), "example_inputs": (_tokens(gen, BATCH, SEQ, VOCAB),),
            "targets": (nn.functional.normalize(torch.randn(BATCH, 32, generator=gen), dim=-1),), "loss": "mse"}


def embedding_gemma2_global512():
    """EmbeddingGemma 2 text tower as above but with the config's own full-attention head dim 512 (one kv head) at
    hidden 64: the global layer's q / o projections are 2048 wide, far above the rest."""
    tf = _tf()
    conf = tf.EmbeddingGemma2TextConfig(vocab_size=VOCAB, num_hidden_layers=2, head_dim=16, sliding_window=4,
                                        layer_types=["sliding_attention", "full_attention"], embedding_dim=32,
                                        hidden_size_per_layer_input=16,
                                        **{k: v for k, v in _LLAMA_LIKE.items()
                                           if k not in ("tie_word_embeddings", "use_cache")})
    gen = _gen()
    return {"model": _MeanPool(tf.EmbeddingGemma2TextModel(conf)), "example_inputs": (_tokens(gen, BATCH, SEQ, VOCAB),),
            "targets": (nn.functional.normalize(torch.randn(BATCH, 32, generator=gen), dim=-1),), "loss": "mse"}


def gte_mlm():
    """GTE (BERT with rotary positions, fused qkv, GLU MLP, post-norm), masked LM."""
    return _encoder("GteConfig", "GteForMaskedLM", None, **_BERT_LIKE)


def data2vec_text_causal():
    """Data2Vec-Text as a causal LM (is_decoder: a RoBERTa with a causal mask and an LM head), hidden 64."""
    return _encoder("Data2VecTextConfig", "Data2VecTextForCausalLM", None, is_decoder=True, pad_token_id=1,
                    **_BERT_LIKE)


def roberta_prelayernorm_mlm():
    """RoBERTa-PreLayerNorm (pre-LN residual blocks, final LayerNorm before the head), masked LM."""
    return _encoder("RobertaPreLayerNormConfig", "RobertaPreLayerNormForMaskedLM", None, pad_token_id=1,
                    **_BERT_LIKE)


class _RoC(nn.Module):
    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, input_ids, shape_ids, pronunciation_ids):
        return self.hf(input_ids=input_ids, input_shape_ids=shape_ids,
                       input_pronunciation_ids=pronunciation_ids).logits


def roc_bert_mlm():
    """RoCBert (token, glyph-shape and pronunciation embeddings concatenated and mapped back), masked LM."""
    tf = _tf()
    conf = tf.RoCBertConfig(vocab_size=VOCAB, shape_vocab_size=64, pronunciation_vocab_size=32,
                            shape_embed_dim=16, pronunciation_embed_dim=16, enable_shape=True,
                            enable_pronunciation=True, concat_input=True, attn_implementation="eager", **_BERT_LIKE)
    gen = _gen()
    ins = (_tokens(gen, BATCH, SEQ, VOCAB), _tokens(gen, BATCH, SEQ, 64), _tokens(gen, BATCH, SEQ, 32))
    return _RoC(tf.RoCBertForMaskedLM(conf)), ins, (_tokens(gen, BATCH, SEQ, VOCAB),)


def ultrabert_mlm():
    """UltraBERT masked LM (LLaMA-style bidirectional encoder: GQA, rotary, sliding-window 4 / full layers,
    RMSNorm prediction head), 2 layers, hidden 64."""
    return _encoder("UltrabertConfig", "UltrabertForMaskedLM", None, head_dim=16, prediction_head_size=64,
                    sliding_window=4, layer_types=["sliding_attention", "full_attention"], num_hidden_layers=2,
                    **{k: v for k, v in _LLAMA_LIKE.items() if k != "attn_implementation"})


def tapas_cls():
    """TAPAS sequence classification (7 token-type embeddings: segment / column / row / rank ids), 3 labels."""
    return _encoder("TapasConfig", "TapasForSequenceClassification", 3, num_labels=3, **_BERT_LIKE)


def tapas_cls_abs_pos():
    """TAPAS sequence classification with absolute positions (reset_position_index_per_cell off: no segmented
    reduce_min), 3 labels."""
    return _encoder("TapasConfig", "TapasForSequenceClassification", 3, num_labels=3,
                    reset_position_index_per_cell=False, **_BERT_LIKE)


# contrastive text towers
_CLIP_TEXT = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                  max_position_embeddings=64, attention_dropout=0.0)


def clip_text_proj():
    """CLIP text tower with projection (causal mask, EOS-token pooling by argmax of the ids, projection 32), MSE on
    the text embedding."""
    tf = _tf()
    conf = tf.CLIPTextConfig(projection_dim=32, eos_token_id=2, attn_implementation="eager", **_CLIP_TEXT)
    return _pooled(tf.CLIPTextModelWithProjection(conf), "text_embeds", 32)


def siglip_text():
    """SigLIP text tower (bidirectional, last-token pooling through a linear head), MSE on the pooled output."""
    tf = _tf()
    conf = tf.SiglipTextConfig(attn_implementation="eager", **_CLIP_TEXT)
    return _pooled(tf.SiglipTextModel(conf), "pooler_output", 64)


def xclip_text():
    """X-CLIP text tower (CLIP-style causal text encoder, argmax-EOS pooling), MSE on the pooled output."""
    tf = _tf()
    conf = tf.XCLIPTextConfig(attn_implementation="eager", **_CLIP_TEXT)
    return _pooled(tf.XCLIPTextModel(conf), "pooler_output", 64)
