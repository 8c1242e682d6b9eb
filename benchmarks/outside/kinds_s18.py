"""Outside models of ``transformers`` text and time-series families no earlier probe file covers (round 18),
random weights, no hub: decoders (BioGPT, CTRL, OpenAI GPT, GPT-NeoX-Japanese, CPM-Ant, ModernBERT decoder, Cwm,
Lfm3) and MoE / MLA decoders (Cohere2-MoE, EXAONE-MoE, Mistral-4, MiMo-V2-Flash, Youtu, HY-V3, DeepSeek-V4),
encoders (XLM, RemBERT, Megatron-BERT, XLM-RoBERTa-XL, I-BERT integer-only, X-MOD, Splinter QA,
NomicBERT, EuroBERT, Jina-v3 LoRA, ERNIE 1, LUKE, LayoutLM, MarkupLM), encoder-decoders (FSMT, mBART, MVP,
Blenderbot, BlenderbotSmall, BigBird-Pegasus, a BertGeneration EncoderDecoderModel), time-series forecasters
with their own loss (Time Series Transformer, Informer, Autoformer, PatchTSMixer, TimesFM) and usage variants
(mBART in bf16, XLM-R with a frozen embedding layer, BioGPT computing its own loss).

Each public function is a factory for ``roam-tvm compare --model benchmarks/outside/kinds_s18.py:<name>``
at the size of hf_more.py (2 layers, hidden 64, vocab 256, 12 tokens, batch 2; MoE cut to 4 experts; series
of 32 steps). Eager attention, no dropout, no cache, seeded.
"""
from __future__ import annotations

import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # hf_more's wrappers
from hf_more import (_BART_LIKE, _DROP0, _LLAMA_LIKE, BATCH, SEQ, VOCAB, CausalLM, Logits, Seq2SeqLM,  # noqa: E402
                     _causal, _encoder, _lm, _seq2seq)
from roam_tvm.zoo.families import _gen, _quiet, _tokens  # noqa: E402

_MOE_SMALL = dict(moe_intermediate_size=32, num_experts_per_tok=2)
_BERT_LIKE = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=96,
                  max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
_GPT_DROP0 = dict(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False, tie_word_embeddings=False,
                  attn_implementation="eager")


def _tf():
    import transformers as tf

    _quiet()
    torch.manual_seed(0)
    return tf


# dense decoders
def biogpt():
    """BioGPT (scaled embeddings, learned positions offset by 2, pre-LayerNorm, GELU), hidden 64."""
    return _causal("BioGpt", hidden_size=64, intermediate_size=96, num_attention_heads=4, max_position_embeddings=64,
                   hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, activation_dropout=0.0, layerdrop=0.0,
                   scale_embedding=True, use_cache=False, tie_word_embeddings=False, attn_implementation="eager")


def ctrl():
    """CTRL (sinusoidal positions added to sqrt(d)-scaled embeddings, pre-LayerNorm, ReLU MLP), hidden 64."""
    tf = _tf()
    conf = tf.CTRLConfig(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, dff=96, n_positions=64, resid_pdrop=0.0,
                         embd_pdrop=0.0, use_cache=False, tie_word_embeddings=False, attn_implementation="eager")
    return _lm(CausalLM(tf.CTRLLMHeadModel(conf)))


def openai_gpt():
    """OpenAI GPT-1 (post-LayerNorm blocks, Conv1D projections, learned positions, tied head), hidden 64."""
    tf = _tf()
    conf = tf.OpenAIGPTConfig(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=64,
                              **{k: v for k, v in _GPT_DROP0.items() if k not in ("use_cache", "tie_word_embeddings")})
    return _lm(CausalLM(tf.OpenAIGPTLMHeadModel(conf)))


def gpt_neox_japanese():
    """GPT-NeoX-Japanese (partial rotary, a separate dense bias added after the attention residual), hidden 64."""
    return _causal("GPTNeoXJapanese", hidden_size=64, num_attention_heads=4, intermediate_multiple_size=2,
                   rotary_pct=0.5, max_position_embeddings=64, attention_dropout=0.0, hidden_dropout=0.0,
                   use_cache=False, tie_word_embeddings=False, attn_implementation="eager")


def cpmant():
    """CPM-Ant (prompt + segment embeddings, T5-style bucketed relative position bias, RMS LayerNorm), dim 64."""
    tf = _tf()
    conf = tf.CpmAntConfig(vocab_size=VOCAB, hidden_size=64, num_attention_heads=4, dim_head=16, dim_ff=96,
                           num_hidden_layers=2, dropout_p=0.0, position_bias_num_buckets=32,
                           position_bias_max_distance=64, prompt_types=4, prompt_length=4, segment_types=4,
                           use_cache=False, init_std=0.02)
    return _lm(CausalLM(tf.CpmAntForCausalLM(conf)))


def modernbert_decoder():
    """ModernBERT decoder (causal ModernBERT: sliding-window local layers, GeGLU, no biases), hidden 64."""
    return _causal("ModernBertDecoder", hidden_size=64, intermediate_size=96, num_attention_heads=4,
                   max_position_embeddings=64, local_attention=8, sliding_window=4, global_attn_every_n_layers=2,
                   layer_types=["sliding_attention", "full_attention"], pad_token_id=0, use_cache=False,
                   tie_word_embeddings=False, attn_implementation="eager")


def cwm():
    """Cwm (LLaMA-3 style with interleaved sliding-window 4 / full layers), hidden 64."""
    return _causal("Cwm", head_dim=16, sliding_window=4, layer_types=["sliding_attention", "full_attention"],
                   **_LLAMA_LIKE)


def lfm3():
    """LFM-3 (gated short-conv layers and sliding-window gated attention, sandwich norms), hidden 64."""
    return _causal("Lfm3", head_dim=16, sliding_window=4, conv_L_cache=3,
                   layer_types=["conv", "sliding_attention"], pad_token_id=0, **_LLAMA_LIKE)


# MoE and MLA decoders
def cohere2_moe():
    """Cohere2-MoE (parallel block, sliding / global layers, 4 experts top-2 + a shared expert averaged in)."""
    return _causal("Cohere2Moe", head_dim=16, sliding_window=4, sliding_window_pattern=2, num_experts=4,
                   num_experts_per_tok=2, num_shared_experts=1, logit_scale=0.25, **_LLAMA_LIKE)


def exaone_moe():
    """EXAONE-MoE (first layer dense, then a grouped sigmoid-free router over 4 experts top-2 + shared expert,
    sliding-window layers), hidden 64."""
    return _causal("ExaoneMoe", head_dim=16, sliding_window=4, sliding_window_pattern=2, first_k_dense_replace=1,
                   num_experts=4, num_shared_experts=1, routed_scaling_factor=2.5, **_MOE_SMALL, **_LLAMA_LIKE)


def mistral4():
    """Mistral-4 (MLA attention with interleaved rope, 4 routed experts top-2 + a shared expert), hidden 64."""
    cfg = dict(_LLAMA_LIKE, num_key_value_heads=4)
    return _causal("Mistral4", n_routed_experts=4, n_shared_experts=1, kv_lora_rank=16, q_lora_rank=32,
                   qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16, head_dim=16, **_MOE_SMALL, **cfg)


def mimo_v2_flash():
    """MiMo-V2-Flash (head dim 24 for q/k but 16 for v, attention value scale, sliding / full layers, 4 experts
    top-2), hidden 64."""
    return _causal("MiMoV2Flash", head_dim=24, v_head_dim=16, sliding_window=5, n_routed_experts=4,
                   layer_types=["sliding_attention", "full_attention"], **_MOE_SMALL, **_LLAMA_LIKE)


def youtu():
    """Youtu-LLM (dense MLA: q / kv LoRA projections, interleaved rope on 8 dims), hidden 64."""
    cfg = dict(_LLAMA_LIKE, num_key_value_heads=4)
    return _causal("Youtu", kv_lora_rank=16, q_lora_rank=32, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16,
                   **cfg)


def hy_v3():
    """HY-V3 (Hunyuan v3: 4 experts top-2 + a shared expert, fp32 expert combine, router scaling), hidden 64."""
    return _causal("HYV3", head_dim=16, num_experts=4, num_shared_experts=1, **_MOE_SMALL, **_LLAMA_LIKE)


def deepseek_v4():
    """DeepSeek-V4 (hyper-connections with Sinkhorn mixing, compressed + sliding attention, sqrt-softplus router),
    4 experts top-2, hidden 64."""
    cfg = dict(_LLAMA_LIKE, num_key_value_heads=1)
    return _causal("DeepseekV4", head_dim=32, q_lora_rank=32, n_routed_experts=4, n_shared_experts=1,
                   compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
                   hc_mult=2, hc_sinkhorn_iters=3, sliding_window=4, o_groups=2, o_lora_rank=16, index_n_heads=2,
                   index_head_dim=16, index_topk=4, num_nextn_predict_layers=0, **_MOE_SMALL, **cfg)


# encoders
def xlm_mlm():
    """XLM (sinusoidal positions, language embeddings, post-LayerNorm, adaptive-softmax-free LM head), MLM."""
    tf = _tf()
    gen = _gen()
    conf = tf.XLMConfig(vocab_size=VOCAB, emb_dim=64, n_layers=2, n_heads=4, max_position_embeddings=64,
                        sinusoidal_embeddings=True, n_langs=2, use_lang_emb=True, dropout=0.0, attention_dropout=0.0)
    model = Logits(tf.XLMWithLMHeadModel(conf))
    return model, (_tokens(gen, BATCH, SEQ, VOCAB),), (_tokens(gen, BATCH, SEQ, VOCAB),)


def rembert_mlm():
    """RemBERT (decoupled 32-wide input / 48-wide output embeddings, projected), masked LM."""
    return _encoder("RemBertConfig", "RemBertForMaskedLM", None, input_embedding_size=32, output_embedding_size=48,
                    classifier_dropout_prob=0.0, **_BERT_LIKE)


def megatron_bert_mlm():
    """Megatron-BERT (pre-LayerNorm residual blocks, final LayerNorm), masked LM."""
    return _encoder("MegatronBertConfig", "MegatronBertForMaskedLM", None, **_BERT_LIKE)


def xlm_roberta_xl_cls():
    """XLM-RoBERTa-XL (pre-LayerNorm RoBERTa, padding-offset positions), sequence classification, 3 labels."""
    return _encoder("XLMRobertaXLConfig", "XLMRobertaXLForSequenceClassification", 3, num_labels=3, pad_token_id=1,
                    classifier_dropout=0.0, **_BERT_LIKE)


def ibert_quant():
    """I-BERT in quant mode (integer-only GELU / softmax / LayerNorm with straight-through rounding, 8-bit
    fake-quantised linears and embeddings), sequence classification, 3 labels."""
    return _encoder("IBertConfig", "IBertForSequenceClassification", 3, num_labels=3, quant_mode=True,
                    pad_token_id=1, **_BERT_LIKE)


def xmod_mlm():
    """X-MOD (per-language bottleneck adapters after each FFN, selected by a default language), masked LM."""
    tf = _tf()
    gen = _gen()
    conf = tf.XmodConfig(vocab_size=VOCAB, pad_token_id=1, languages=["en_XX", "de_DE"], adapter_reduction_factor=4,
                         pre_norm=False, attn_implementation="eager", **_BERT_LIKE)
    hf = tf.XmodForMaskedLM(conf)
    hf.set_default_language("de_DE")
    return Logits(hf), (_tokens(gen, BATCH, SEQ, VOCAB),), (_tokens(gen, BATCH, SEQ, VOCAB),)


class _SpanLogits(nn.Module):
    """QA start / end logits concatenated to ``[B, 2, T]`` (a span-extraction head's two distributions)."""

    def __init__(self, hf, **kw):
        super().__init__()
        self.hf, self.kw = hf, kw

    def forward(self, input_ids):
        out = self.hf(input_ids=input_ids, **self.kw)
        return torch.stack([out.start_logits, out.end_logits], 1)


def splinter_qa():
    """Splinter QA (question-aware span selection: the logits of each position against the [QUESTION] token's
    representation), start / end logits as a 2-way ``[B, 2, T]`` cross entropy over positions."""
    tf = _tf()
    gen = _gen()
    conf = tf.SplinterConfig(vocab_size=VOCAB, question_token_id=7, pad_token_id=0, attn_implementation="eager",
                             **_BERT_LIKE)
    ids = _tokens(gen, BATCH, SEQ, VOCAB)
    ids[ids == 7] = 8
    ids[:, 3] = 7  # one [QUESTION] token per row
    model = _SpanLogits(tf.SplinterForQuestionAnswering(conf))
    return model, (ids,), (torch.randint(0, SEQ, (BATCH, 2), generator=gen),)


def nomic_bert_mlm():
    """NomicBERT (rotary positions, SwiGLU, fused qkv, no biases, post-LayerNorm), masked LM."""
    return _encoder("NomicBertConfig", "NomicBertForMaskedLM", None, pad_token_id=0, **_BERT_LIKE)


def eurobert_cls():
    """EuroBERT (LLaMA-style bidirectional encoder: RMSNorm, RoPE, SwiGLU; mean-pooled classifier), 3 labels."""
    cfg = {k: v for k, v in _LLAMA_LIKE.items() if k not in ("use_cache", "attn_implementation")}
    return _encoder("EuroBertConfig", "EuroBertForSequenceClassification", 3, num_labels=3, num_hidden_layers=2,
                    classifier_pooling="mean", pad_token_id=0, **cfg)


def jina_v3_cls():
    """Jina-embeddings-v3 (XLM-R with rotary positions and task LoRA adapters), sequence classification, 3 labels."""
    return _encoder("JinaEmbeddingsV3Config", "JinaEmbeddingsV3ForSequenceClassification", 3, num_labels=3,
                    pad_token_id=1, classifier_dropout=0.0, **_BERT_LIKE)


def ernie_mlm():
    """ERNIE 1.0/3.0 (BERT with task-type embeddings), masked LM."""
    return _encoder("ErnieConfig", "ErnieForMaskedLM", None, use_task_id=True, task_type_vocab_size=3, **_BERT_LIKE)


class _LukeEntityCls(nn.Module):
    def __init__(self, hf, entity_ids, entity_pos):
        super().__init__()
        self.hf = hf
        self.register_buffer("entity_ids", entity_ids, persistent=False)
        self.register_buffer("entity_pos", entity_pos, persistent=False)

    def forward(self, input_ids):
        return self.hf(input_ids=input_ids, entity_ids=self.entity_ids,
                       entity_position_ids=self.entity_pos).logits


def luke_entity_cls():
    """LUKE entity classification (word + entity streams, entity-aware self-attention with 4 query matrices,
    entity positions pooled from word positions), 4 labels."""
    tf = _tf()
    gen = _gen()
    conf = tf.LukeConfig(vocab_size=VOCAB, entity_vocab_size=16, entity_emb_size=32, use_entity_aware_attention=True,
                         num_labels=4, pad_token_id=1, **_BERT_LIKE)
    ents = torch.tensor([[3], [5]])
    pos = torch.tensor([[[1, 2, -1]], [[4, 5, 6]]])
    model = _LukeEntityCls(tf.LukeForEntityClassification(conf), ents, pos)
    return model, (_tokens(gen, BATCH, SEQ, VOCAB),), (torch.randint(0, 4, (BATCH,), generator=gen),)


class _WithAux(nn.Module):
    """``forward(input_ids, aux)`` -> ``hf(input_ids=..., <key>=aux).logits``."""

    def __init__(self, hf, key: str):
        super().__init__()
        self.hf, self.key = hf, key

    def forward(self, input_ids, aux):
        return self.hf(input_ids=input_ids, **{self.key: aux}).logits


def layoutlm_token_cls():
    """LayoutLM token classification (2-D bbox embeddings: x0/y0/x1/y1 + width / height tables), 5 labels."""
    tf = _tf()
    gen = _gen()
    conf = tf.LayoutLMConfig(vocab_size=VOCAB, max_2d_position_embeddings=128, num_labels=5, **_BERT_LIKE)
    x0 = torch.randint(0, 60, (BATCH, SEQ, 2), generator=gen)
    box = torch.cat([x0, x0 + torch.randint(1, 60, (BATCH, SEQ, 2), generator=gen)], -1)
    model = _WithAux(tf.LayoutLMForTokenClassification(conf), "bbox")
    return model, (_tokens(gen, BATCH, SEQ, VOCAB), box), (torch.randint(0, 5, (BATCH, SEQ), generator=gen),)


class _MarkupLM(nn.Module):
    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, input_ids, xpath_tags_seq, xpath_subs_seq):
        return self.hf(input_ids=input_ids, xpath_tags_seq=xpath_tags_seq, xpath_subs_seq=xpath_subs_seq).logits


def markuplm_token_cls():
    """MarkupLM token classification (XPath embeddings: per-depth tag + subscript tables, an MLP over depth 8),
    5 labels."""
    tf = _tf()
    gen = _gen()
    conf = tf.MarkupLMConfig(vocab_size=VOCAB, max_depth=8, max_xpath_tag_unit_embeddings=16,
                             max_xpath_subs_unit_embeddings=16, xpath_unit_hidden_size=8, tag_pad_id=15,
                             subs_pad_id=15, num_labels=5, pad_token_id=1, **_BERT_LIKE)
    tags = torch.randint(0, 15, (BATCH, SEQ, 8), generator=gen)
    subs = torch.randint(0, 15, (BATCH, SEQ, 8), generator=gen)
    model = _MarkupLM(tf.MarkupLMForTokenClassification(conf))
    return model, (_tokens(gen, BATCH, SEQ, VOCAB), tags, subs), (torch.randint(0, 5, (BATCH, SEQ), generator=gen),)


# encoder-decoders
def fsmt():
    """FSMT (fairseq WMT: separate 256 source / 200 target vocabularies, sinusoidal positions, post-LN), 2+2."""
    tf = _tf()
    gen = _gen()
    conf = tf.FSMTConfig(src_vocab_size=VOCAB, tgt_vocab_size=200, langs=["en", "de"], d_model=64, encoder_layers=2,
                         decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=96,
                         decoder_ffn_dim=96, max_position_embeddings=64, dropout=0.0, attention_dropout=0.0,
                         activation_dropout=0.0, encoder_layerdrop=0.0, decoder_layerdrop=0.0, use_cache=False,
                         pad_token_id=1, decoder_start_token_id=2, tie_word_embeddings=False)
    model = Seq2SeqLM(tf.FSMTForConditionalGeneration(conf))
    ins = (_tokens(gen, BATCH, SEQ, VOCAB), _tokens(gen, BATCH, SEQ - 4, 200))
    return model, ins, (_tokens(gen, BATCH, SEQ - 4, 200),)


def mbart():
    """mBART (pre-LayerNorm with final encoder / decoder LayerNorms, embedding LayerNorm), 2+2 layers."""
    return _seq2seq("MBartConfig", "MBartForConditionalGeneration", encoder_layerdrop=0.0, decoder_layerdrop=0.0,
                    **_BART_LIKE)


def mvp():
    """MVP (BART with lightweight per-layer prompts: a prompt MLP feeding extra keys / values), 2+2 layers."""
    return _seq2seq("MvpConfig", "MvpForConditionalGeneration", use_prompt=True, prompt_length=4,
                    prompt_mid_dim=32, **_BART_LIKE)


def blenderbot():
    """Blenderbot (pre-LayerNorm, learned positions, final-logits bias), 2+2 layers."""
    return _seq2seq("BlenderbotConfig", "BlenderbotForConditionalGeneration", encoder_layerdrop=0.0,
                    decoder_layerdrop=0.0, **_BART_LIKE)


def blenderbot_small():
    """Blenderbot-small (post-LayerNorm, LayerNorm on the embeddings only), 2+2 layers."""
    return _seq2seq("BlenderbotSmallConfig", "BlenderbotSmallForConditionalGeneration", encoder_layerdrop=0.0,
                    decoder_layerdrop=0.0, **_BART_LIKE)


def bigbird_pegasus():
    """BigBird-Pegasus (encoder in full attention at this length, Pegasus decoder, sinusoid-free learned
    positions), 2+2 layers."""
    cfg = dict(_BART_LIKE)
    cfg.pop("attn_implementation")
    return _seq2seq("BigBirdPegasusConfig", "BigBirdPegasusForConditionalGeneration", attention_type="original_full",
                    **cfg)


def bert2bert():
    """EncoderDecoderModel of a BertGeneration encoder and a BertGeneration decoder with cross-attention."""
    tf = _tf()
    gen = _gen()
    common = dict(vocab_size=VOCAB, pad_token_id=0, bos_token_id=2, eos_token_id=3, **_BERT_LIKE)
    enc = tf.BertGenerationEncoder(tf.BertGenerationConfig(**common))
    dec = tf.BertGenerationDecoder(tf.BertGenerationConfig(is_decoder=True, add_cross_attention=True, **common))
    hf = tf.EncoderDecoderModel(encoder=enc, decoder=dec)
    hf.config.decoder_start_token_id, hf.config.pad_token_id = 2, 0
    model = Seq2SeqLM(hf)
    ins = (_tokens(gen, BATCH, SEQ, VOCAB), _tokens(gen, BATCH, SEQ - 4, VOCAB))
    return model, ins, (_tokens(gen, BATCH, SEQ - 4, VOCAB),)


# time-series forecasters computing their own loss
class _OwnLoss(nn.Module):
    """``forward(*tensors)`` -> the ``.loss`` of ``hf(**dict(zip(names, tensors)))``."""

    def __init__(self, hf, names):
        super().__init__()
        self.hf, self.names = hf, tuple(names)

    def forward(self, *tensors):
        return self.hf(**dict(zip(self.names, tensors))).loss


def _ts_inputs(conf, context: int, horizon: int, gen):
    feats = conf.num_time_features
    lags = max(conf.lags_sequence)
    past = context + lags
    return {"past_values": torch.randn(BATCH, past, generator=gen).abs() + 0.5,
            "past_time_features": torch.randn(BATCH, past, feats, generator=gen),
            "past_observed_mask": torch.ones(BATCH, past),
            "future_values": torch.randn(BATCH, horizon, generator=gen).abs() + 0.5,
            "future_time_features": torch.randn(BATCH, horizon, feats, generator=gen)}


def _ts(name: str, **cfg):
    tf = _tf()
    gen = _gen()
    conf = getattr(tf, f"{name}Config")(prediction_length=8, context_length=16, lags_sequence=[1, 2, 3],
                                        num_time_features=2, d_model=32, encoder_layers=2, decoder_layers=2,
                                        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=48,
                                        decoder_ffn_dim=48, dropout=0.0, attention_dropout=0.0,
                                        activation_dropout=0.0, encoder_layerdrop=0.0, decoder_layerdrop=0.0,
                                        use_cache=False, **cfg)
    ins = _ts_inputs(conf, 16, 8, gen)
    model = _OwnLoss(getattr(tf, f"{name}ForPrediction")(conf), ins)
    return model, tuple(ins.values()), (), lambda out: out


def time_series_transformer():
    """Time Series Transformer (lagged + time features, mean scaling, Student-t head; NLL loss in the model)."""
    return _ts("TimeSeriesTransformer")


def informer():
    """Informer with full attention and distilling conv layers between encoder layers (Student-t NLL loss)."""
    return _ts("Informer", attention_type="full", distil=True)


def autoformer():
    """Autoformer (series decomposition by moving average, FFT auto-correlation attention, top-k delay
    aggregation; Student-t NLL loss in the model)."""
    return _ts("Autoformer", moving_average=5, autocorrelation_factor=1)


def patchtsmixer():
    """PatchTSMixer forecaster (MLP-Mixer over patches and features, gated attention, std scaling), 3 channels,
    context 32, horizon 8, MSE loss in the model."""
    tf = _tf()
    gen = _gen()
    conf = tf.PatchTSMixerConfig(context_length=32, prediction_length=8, patch_length=8, patch_stride=8,
                                 num_input_channels=3, d_model=32, num_layers=2, expansion_factor=2, dropout=0.0,
                                 head_dropout=0.0, gated_attn=True, mode="mix_channel", scaling="std",
                                 self_attn=True, self_attn_heads=2)
    ins = {"past_values": torch.randn(BATCH, 32, 3, generator=gen),
           "future_values": torch.randn(BATCH, 8, 3, generator=gen)}
    return _OwnLoss(tf.PatchTSMixerForPrediction(conf), ins), tuple(ins.values()), (), lambda out: out


class _TimesFm(nn.Module):
    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, past_values, future_values):
        return self.hf(past_values=list(past_values.unbind(0)), future_values=future_values).loss


def timesfm():
    """TimesFM (patched decoder-only forecaster: residual-block patch embedding, per-patch normalisation,
    quantile heads; MSE + quantile loss in the model), context 32, horizon 8."""
    tf = _tf()
    gen = _gen()
    conf = tf.TimesFmConfig(patch_length=8, context_length=32, horizon_length=8, quantiles=[0.1, 0.5, 0.9],
                            hidden_size=64, intermediate_size=96, head_dim=16, num_attention_heads=4,
                            num_hidden_layers=2, attention_dropout=0.0, attn_implementation="eager")
    ins = (torch.randn(BATCH, 32, generator=gen), torch.randn(BATCH, 8, generator=gen))
    return _TimesFm(tf.TimesFmModelForPrediction(conf)), ins, (), lambda out: out


# usage variants
def mbart_bf16():
    """mBART as mbart, the whole model cast to bfloat16 (``model.to(torch.bfloat16)``)."""
    model, ins, tgt = mbart()
    return model.to(torch.bfloat16), ins, tgt


def xlm_roberta_frozen_embed():
    """XLM-RoBERTa sequence classification with the embedding layer frozen (``requires_grad_(False)``)."""
    model, ins, tgt = _encoder("XLMRobertaConfig", "XLMRobertaForSequenceClassification", 3, num_labels=3,
                               pad_token_id=1, classifier_dropout=0.0, **_BERT_LIKE)
    model.hf.roberta.embeddings.requires_grad_(False)
    return model, ins, tgt


class _LabelsLoss(nn.Module):
    """``forward(input_ids, labels)`` -> the loss the Hugging Face model computes from ``labels=``."""

    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, input_ids, labels):
        return self.hf(input_ids=input_ids, labels=labels, use_cache=False).loss


def biogpt_own_loss():
    """BioGPT computing its own shifted-label loss from ``labels=`` (the loss is the output)."""
    model, ins, tgt = biogpt()
    return _LabelsLoss(model.hf), (ins[0], tgt[0]), (), lambda out: out


def time_series_transformer_normal():
    """Time Series Transformer as time_series_transformer but with a Normal output head (no Student-t
    ``lgamma``), so the rest of the forecaster is probed."""
    return _ts("TimeSeriesTransformer", distribution_output="normal")


def informer_normal():
    """Informer as informer but with a Normal output head (no Student-t ``lgamma``) and no distilling convs
    (under torch.export transformers builds a full-length encoder mask that the halved layer-2 sequence no longer
    fits), so the rest of the forecaster is probed."""
    return _ts("Informer", attention_type="full", distil=False, distribution_output="normal")
