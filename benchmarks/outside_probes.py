"""Outside models (the breadth probes' user-style models in benchmarks/outside/), one compare row each.

    python benchmarks/outside_probes.py                    # every row, one at a time
    python benchmarks/outside_probes.py dlrm stn           # some rows
    nice python benchmarks/outside_probes.py --timeout 600 --max-rss-gb 6
    python benchmarks/outside_probes.py --file kinds_s18.py --summary S.json --table T.md   # one probe file's rows
    python benchmarks/outside_probes.py --file kinds_s18.py --summary-only ...            # its table, no runs

Each row is one ``roam-tvm compare --model benchmarks/outside/<file>:<factory> --optimizer adam
--planners tvm-default pytorch roam --quiet`` in its own process, watched for wall time and
resident memory by ``families.watch``; a row that fails or is stopped is recorded with its error
and the others go on. It writes ``benchmarks/results/runs/outside/<factory>.json`` (the compare
report plus ``run`` and ``row``, or ``{"error", "run"}``), then rebuilds from every row file there
(``--file``: from that probe file's rows only)

``benchmarks/results/outside_probes.json``
    ``{command, versions, machine, rows: [{model, file, ops, tvm_default, pytorch, roam, cut, pair, set,
    cut_aligned, exact, best_bound, roam_over_cut, roam_over_best, below_tvm_default, below_pytorch, plan_seconds, valid, error, meets_bar}]}``
    (peaks in bytes; ``below_*`` means at or below; ``meets_bar``: valid, at or below tvm-default,
    within 2% of cut);
``benchmarks/results/outside_probes.md``
    the same rows as a Markdown table (also printed).
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # the process watcher is families.py's
from families import best_bound, watch  # noqa: E402

ROOT = os.path.dirname(HERE)
RUNS = os.path.join(HERE, "results", "runs", "outside")
SUMMARY = os.path.join(HERE, "results", "outside_probes.json")
TABLE = os.path.join(HERE, "results", "outside_probes.md")
# factory -> file under benchmarks/outside/; the order of the table
ROWS = {name: "embeddings.py" for name in ("fasttext", "fasttext_offsets", "maxbag", "skipgram", "pointer", "recsys",
                                           "dlrm", "ncf", "charcnn", "masked_lstm")}
ROWS.update({name: "layers.py" for name in ("speech_ctc", "seq2seq", "stn", "unfold_vit", "ctc_inside")})
ROWS.update({name: "activations.py" for name in ("mbv3", "bloom", "tcn", "tcn_wide")})
ROWS.update({name: "rnns.py" for name in ("rnn_tanh2", "rnn_relu2", "gru_tiny2", "lstm2", "gru2_big")})
ROWS.update({name: "rnns_layout.py" for name in ("lstm1_bf", "lstm1_tm", "lstm2_bf", "lstm2_tm", "lstm1_bi",
                                                  "lstm1_tag", "gru1_bf", "gru1_tm", "gru2_bf", "gru1_bi",
                                                  "gru1_tag", "rnn1_bf", "rnn2_tm")})
ROWS.update({name: "hf_more.py" for name in (
    "gpt_neox", "falcon", "phi", "phi3", "gemma", "gemma2", "stablelm", "olmo", "olmo2", "granite", "qwen3",
    "gemma3", "cohere", "gptj", "opt", "qwen2_moe", "mixtral", "llama_bf16", "llama", "llama_sdpa",
    "bert_cls_defaults", "llama_lora", "llama_lora_medium", "bart", "pegasus", "marian", "mt5", "umt5",
    "bert_mlm", "albert_mlm", "electra_mlm", "roberta_cls", "distilbert_cls", "vit", "deit", "beit",
    "convnextv2", "regnet", "resnet_hf", "whisper_enc")})
ROWS.update({name: "hf_usage.py" for name in ("llama_raw", "llama_own_loss", "llama_ckpt", "t5_own_loss",
                                                "mixtral_aux_loss", "swin_own_loss", "qwen2_auto_bf16",
                                                "llama_wrapped_mask", "qwen2_moe_aux_mask", "gpt2_own_mask",
                                                "swin_default_rates")})
ROWS.update({name: "cnns_more.py" for name in (
    "effnet", "resnext", "shufflenet", "squeezenet", "inception", "convnext", "preact_resnet", "vgg_dropout",
    "mobilenetv2", "unet", "fpn", "norms", "adaptive_pool", "unpool", "audio1d", "video3d", "pixelshuffle",
    "label_smoothing", "weighted_ce", "frozen_bn", "bf16_cnn", "channels_last", "alexnet", "cyclegan", "deeplab",
    "activations", "drop_path", "bf16_model", "pools", "frozen_bn_bf16")})
ROWS.update({name: "kinds_more.py" for name in (
    "swinv2", "swin_pad", "swin_frozen_embed", "swin_amp", "t5_small", "longt5_local", "longt5_tglobal",
    "t5_enc_cls", "t5_lora", "llama_tied_mqa", "llama_rope_llama3", "llama_rope_dynamic", "switch", "olmoe",
    "granitemoe", "deepseek_v3")})
ROWS.update({name: "kinds_more_nn.py" for name in (
    "densenet_ckpt", "densenet_bc", "unet_convt_bn", "unet_attention", "unet_odd", "lstm_proj", "lstm3", "gru_bi2",
    "lstm_lm", "moe_expert_choice")})
ROWS.update({name: "kinds_new.py" for name in (
    "qwen2", "mistral_swa", "starcoder2", "nemotron", "glm", "glm4", "helium", "smollm3", "olmo3", "qwen3_moe",
    "phimoe", "jetmoe", "dbrx", "deepseek_v2", "flan_t5", "byt5", "nllb_moe", "maskformer_swin", "donut_swin",
    "qwen2_frozen_body", "swin_frozen_stage1", "t5_frozen_encoder", "qwen2_masked_loss", "helium_model_output",
    "qwen2_dict_out", "gpt_oss", "glm4_moe", "apertus", "exaone4", "ernie4_5_moe", "lfm2")})
ROWS.update({name: "kinds_new_nn.py" for name in (
    "gru_cell_loop", "lstm_cell_loop2", "lstm_dropout", "gru_nobias", "rnn_packed", "moe_aux_loss", "cnn_dict_aux",
    "densenet_dropout", "densenet_buffer", "meta_llama")})
ROWS.update({name: "kinds_fresh.py" for name in (
    "mamba", "mamba2", "bamba", "rwkv", "mpt", "gpt_bigcode", "deberta_v2", "convbert", "funnel", "clip",
    "segformer", "mobilevit", "timesformer", "wav2vec2_conformer", "fnet", "xlnet", "longformer", "roformer",
    "mpnet", "esm", "squeezebert", "levit", "poolformer", "falcon_mamba", "hubert", "bigbird", "reformer")})
ROWS.update({name: "kinds_fresh_losses.py" for name in ("vqvae", "simclr", "triplet", "capsnet", "ft_transformer")})
ROWS.update({name: "kinds_fresh3.py" for name in (
    "recurrent_gemma", "jamba", "zamba2", "falcon_h1", "diffllama", "dinov2", "pvt_v2", "focalnet", "efficientnet_hf",
    "wavlm", "nystromformer")})
ROWS.update({name: "kinds_fresh_nn.py" for name in ("gcn", "gat", "perceiver", "gfnet")})
ROWS.update({name: "moe_dispatch.py" for name in (
    "mistral_src", "mistral_src_bf16", "mixtral_hf4", "bool_mask_moe", "shared_expert_moe", "switch_top1")})
ROWS.update({name: "kinds_s16.py" for name in (
    "arcee", "cohere2", "doge", "ernie4_5", "seed_oss", "vaultgemma", "nanochat", "ministral", "ministral3", "jais2",
    "hunyuan_dense", "minicpm3", "dots1", "flex_olmo", "granitemoeshared", "afmoe", "solar_open", "mellum", "laguna",
    "lfm2_moe", "hunyuan_moe", "glm4_moe_lite", "llama4_text", "granitemoehybrid", "t5gemma")})
ROWS.update({name: "kinds_s16_nn.py" for name in (
    "lit_llama", "hand_t5", "moe_gather_weights", "moe_dense_einsum", "lstm_learned_init", "gru_tagger_bf16",
    "hand_swin", "densenet_frozen_block", "cnn_interpolate_seg", "vit_mha", "moe_bincount_aux", "gshard_capacity",
    "sort_dispatch", "lstm_regression", "odd_sizes_cnn")})
ROWS.update({name: "kinds_s17.py" for name in (
    "bitnet", "persimmon", "codegen", "gpt_neo", "xglm", "gemma3n_text", "qwen3_next", "minimax", "kimi_linear",
    "xlstm", "longcat_flash", "minimax_m2", "nemotron_h", "prophetnet", "pegasus_x", "led", "m2m100",
    "speech2text", "deberta", "mobilebert", "canine", "modernbert", "bit", "cvt", "hiera", "swiftformer",
    "mobilevitv2", "hgnet_v2", "dinov3_vit", "sew_d", "ast", "parakeet_ctc", "gemma3n_text_noclip", "yoso",
    "zamba", "patchtst_cls", "dinov3_vit_norescale", "gemma3n_text_plain", "deepseek_v32", "musicgen",
    "gemma4_text", "qwen3_5_text", "olmo_hybrid", "hrm_text", "flint", "zaya")})
ROWS.update({name: "kinds_s17_nn.py" for name in (
    "encoder_key_padding", "encoder_causal_mask", "sdpa_causal", "sdpa_float_mask", "einsum_attention",
    "baddbmm_attention", "rope_complex_bf16", "weight_norm_mlp", "spectral_norm_disc", "containers_layer_scale",
    "shared_weights", "cumulative_ops", "where_normalize", "glu_bilinear_prelu", "conformer", "conformer_bf16",
    "bce_pos_weight", "kl_div_log_target", "huber_smooth_l1", "nll_weighted_ignore", "cosine_margin_ranking",
    "focal_loss", "mse_sum", "bert_token_cls", "bert_qa", "roberta_multiple_choice", "bert_regression",
    "distilbert_multilabel", "gpt_neox_padded_labels", "bart_labels_decoder_ids", "bert_token_cls_bf16",
    "bert_cls_frozen_encoder", "encoder_key_padding_bf16", "simsiam_no_grad", "ema_vq_codebook", "fake_quant_qat",
    "soft_target_ce", "soft_target_named_ce", "gaussian_poisson_nll", "multi_margin_softmargin",
    "orthogonal_param", "full_transformer_masks", "sdpa_causal_fp16", "mha_bf16", "compiled_module",
    "llama_seqcls_padded", "bert_pretraining", "wav2vec2_ctc")})


def public_factories(file: str) -> list[str]:
    """The public top-level functions of ``benchmarks/outside/<file>`` in file order, read without importing it
    (a probe file's every public function is a factory); none if the file is absent."""
    path = os.path.join(HERE, "outside", file)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    return [node.name for node in tree.body if isinstance(node, ast.FunctionDef) and not node.name.startswith("_")]


# session 18's probe files and later ones (kinds_s19*.py, ...): every public function is a row
for _file in sorted(f for f in os.listdir(os.path.join(HERE, "outside"))
                    if re.fullmatch(r"kinds_s(1[89]|[2-9]\d)\w*\.py", f)):
    ROWS.update({name: _file for name in public_factories(_file)})
# rows that run a factory of ROWS with extra compare flags: row -> (factory, flags)
VARIANTS = {"t5_small_bf16amp": ("t5_small", ["--precision", "bf16-amp"]),
            "t5_small_fp16amp": ("t5_small", ["--precision", "fp16-amp"]),
            "swin_amp_bf16amp": ("swin_amp", ["--precision", "bf16-amp"]),
            "swin_amp_fp16amp": ("swin_amp", ["--precision", "fp16-amp"]),
            "t5_lora_bf16amp": ("t5_lora", ["--precision", "bf16-amp"]),
            "qwen2_bf16amp": ("qwen2", ["--precision", "bf16-amp"]),
            "qwen2_fp16amp": ("qwen2", ["--precision", "fp16-amp"]),
            "gru_cell_loop_bf16amp": ("gru_cell_loop", ["--precision", "bf16-amp"]),
            "flan_t5_bf16amp": ("flan_t5", ["--precision", "bf16-amp"]),
            "mamba_bf16amp": ("mamba", ["--precision", "bf16-amp"]),
            "clip_fp16amp": ("clip", ["--precision", "fp16-amp"]),
            "deberta_v2_bf16amp": ("deberta_v2", ["--precision", "bf16-amp"]),
            "gcn_bf16amp": ("gcn", ["--precision", "bf16-amp"]),
            "lstm_lm_bf16amp": ("lstm_lm", ["--precision", "bf16-amp"]),
            "gru_bi2_fp16amp": ("gru_bi2", ["--precision", "fp16-amp"]),
            "llama_bf16amp": ("llama", ["--precision", "bf16-amp"]),
            "llama_fp16amp": ("llama", ["--precision", "fp16-amp"]),
            "llama_lora_bf16amp": ("llama_lora", ["--precision", "bf16-amp"])}
CUT_SLACK = 1.02  # the bar: roam within 2% of the cut lower bound


def factory_ref(name: str) -> str:
    """``benchmarks/outside/<file>:<factory>`` for ``roam-tvm compare --model`` (a variant's factory's)."""
    factory = VARIANTS[name][0] if name in VARIANTS else name
    return f"benchmarks/outside/{ROWS[factory]}:{factory}"


def compare_command(name: str, json_path: str) -> list[str]:
    flags = VARIANTS[name][1] if name in VARIANTS else []
    return [sys.executable, "-m", "roam_tvm", "compare", "--model", factory_ref(name), "--optimizer", "adam",
            "--planners", "tvm-default", "pytorch", "roam", *flags, "--quiet", "--json", json_path]


def _number(x) -> float | None:
    """A byte figure, also from a ``{"peak_bytes": ...}`` bound; None if missing or not positive."""
    if isinstance(x, dict):
        x = x.get("peak_bytes")
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 else None


def summary_row(name: str, report: dict | None, error: str | None = None) -> dict:
    """One summary row from a compare report (None when the run gave none) and the run's error.

    A report missing roam's peak or the cut bound gets ``error`` naming what is missing and
    ``None`` for the flags it cannot decide.
    """
    report = report or {}
    planners = report.get("planners") or {}
    peaks = {k: _number((planners.get(k) or {}).get("peak_bytes")) for k in ("tvm-default", "pytorch", "roam")}
    bounds = report.get("lower_bounds") or {}
    cut, roam = _number(bounds.get("cut")), peaks["roam"]
    if error is None and report:
        missing = [what for what, v in (("roam peak_bytes", roam), ("lower_bounds.cut", cut)) if v is None]
        error = f"report lacks {', '.join(missing)}" if missing else None
    elif error is None:
        error = "no compare report"
    valid = (planners.get("roam") or {}).get("valid")
    file = ROWS.get(VARIANTS[name][0] if name in VARIANTS else name, "?")
    row = {"model": name, "file": f"benchmarks/outside/{file}", "ops": report.get("ops"),
           "tvm_default": peaks["tvm-default"], "pytorch": peaks["pytorch"], "roam": roam, "cut": cut,
           "pair": _number(bounds.get("pair")), "set": _number(bounds.get("set")),
           "cut_aligned": _number(bounds.get("cut_aligned")), "exact": _number(bounds.get("exact")),
           "roam_over_cut": roam / cut if roam and cut else None,
           "below_tvm_default": None if roam is None or peaks["tvm-default"] is None else roam <= peaks["tvm-default"],
           "below_pytorch": None if roam is None or peaks["pytorch"] is None else roam <= peaks["pytorch"],
           "plan_seconds": (planners.get("roam") or {}).get("plan_seconds"),
           "valid": valid if isinstance(valid, bool) else None, "error": error}
    row["meets_bar"] = bool(row["valid"] and row["below_tvm_default"] and row["roam_over_cut"] is not None
                            and row["roam_over_cut"] <= CUT_SLACK)
    best = best_bound({"cut": cut, "pair": row["pair"], "set": row["set"],  # figures as _number reads them
                       "exact": row["exact"], "cut_aligned": row["cut_aligned"]})
    row["best_bound"] = best
    row["roam_over_best"] = roam / best if roam and best else None
    return row


def _ratio(a, b) -> str:
    return f"{a / b:.3f}" if a and b else "-"


def _bytes(x) -> str:
    return f"{x:,}" if x else "-"


def markdown(rows: list[dict]) -> str:
    """The summary rows as a Markdown table (bytes; roam/cut, roam/tvm-default, roam/pytorch)."""
    lines = ["| model | file | ops | tvm-default B | pytorch B | roam B | cut B | roam/cut | roam/best bound "
             "| vs tvm-default | vs pytorch | roam plan s | valid | bar |", "|" + "---|" * 14]
    for r in rows:
        bar = "yes" if r["meets_bar"] else ("no" if not r["error"] else f"no: {r['error'][:80]}")
        lines.append(f"| {r['model']} | {os.path.basename(r['file'])} | {r['ops'] or '-'} | {_bytes(r['tvm_default'])} "
                     f"| {_bytes(r['pytorch'])} | {_bytes(r['roam'])} | {_bytes(r['cut'])} "
                     f"| {'-' if r['roam_over_cut'] is None else format(r['roam_over_cut'], '.4f')} "
                     f"| {'-' if r.get('roam_over_best') is None else format(r['roam_over_best'], '.4f')} "
                     f"| {_ratio(r['roam'], r['tvm_default'])} | {_ratio(r['roam'], r['pytorch'])} "
                     f"| {'-' if r['plan_seconds'] is None else format(r['plan_seconds'], '.1f')} "
                     f"| {r['valid']} | {bar} |")
    return "\n".join(lines) + "\n"


def run_row(name: str, timeout: float, max_rss_gb: float, out: str) -> dict:
    """Run one row's compare, write ``<out>/<name>.json`` and return it."""
    os.makedirs(out, exist_ok=True)
    final = os.path.join(out, f"{name}.json")
    with tempfile.TemporaryDirectory(prefix="roam_outside_") as tmp:
        report_path = os.path.join(tmp, "report.json")
        log_path = os.path.join(tmp, "log.txt")
        run = watch(compare_command(name, report_path), timeout, int(max_rss_gb * 2**30), log_path)
        run["command"] = run["command"].replace(report_path, os.path.relpath(final, ROOT))
        with open(log_path, encoding="utf-8", errors="replace") as f:
            tail = f.read().replace("\r", "\n")[-1500:]
        if run["stopped"] or run["returncode"] != 0 or not os.path.exists(report_path):
            result = {"model": factory_ref(name), "error": run["stopped"] or tail or f"exit {run['returncode']}",
                      "run": run}
            result["row"] = summary_row(name, None, result["error"])
        else:
            with open(report_path, encoding="utf-8") as f:
                result = json.load(f)
            result.update(run=run, row=summary_row(name, result))
    with open(final, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    return result


def write_summary(command: str, out: str, summary: str, table: str, names: list[str] | None = None) -> list[dict]:
    """Rebuild the summary JSON and Markdown table from every row file in ``out`` (only ``names``' if given)."""
    rows, versions, machine = [], None, None
    for name in [n for n in [*ROWS, *VARIANTS] if names is None or n in names]:
        path = os.path.join(out, f"{name}.json")
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            result = json.load(f)
        rows.append(result["row"])
        versions, machine = versions or result.get("versions"), machine or result.get("machine")
    with open(summary, "w", encoding="utf-8") as f:
        json.dump({"command": command, "versions": versions, "machine": machine, "rows": rows}, f, indent=1)
    text = markdown(rows)
    with open(table, "w", encoding="utf-8") as f:
        f.write(f"Outside models, `{command}` (one `roam-tvm compare` per row; bytes).\n\n{text}")
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", help=f"rows to run (default all, or --file's: {', '.join(ROWS)})")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds before a row is stopped")
    ap.add_argument("--max-rss-gb", type=float, default=8.0, help="resident GiB before a row is stopped")
    ap.add_argument("--out", default=RUNS, help="folder of the per-row JSONs")
    ap.add_argument("--summary", default=SUMMARY)
    ap.add_argument("--table", default=TABLE)
    ap.add_argument("--file", help="summary and table of this probe file's rows only (e.g. kinds_s18.py); with no "
                    "rows named, its rows are the ones run")
    ap.add_argument("--summary-only", action="store_true", help="rebuild the summary from the row files, run nothing")
    args = ap.parse_args(argv)
    names = None
    if args.file:
        names = [n for n, f in ROWS.items() if f == args.file]
        if not names:
            ap.error(f"--file {args.file}: no rows come from that file")
    args.models = args.models or names or list(ROWS)
    unknown = [m for m in args.models if m not in ROWS and m not in VARIANTS]
    if unknown:
        ap.error(f"unknown row(s) {unknown}; valid: {', '.join([*ROWS, *VARIANTS])}")
    if args.timeout <= 0 or args.max_rss_gb <= 0:
        ap.error("--timeout and --max-rss-gb must be above 0")
    command = "python benchmarks/outside_probes.py " + " ".join(sys.argv[1:] if argv is None else argv)
    for name in [] if args.summary_only else args.models:
        row = run_row(name, args.timeout, args.max_rss_gb, args.out)["row"]
        print(f"{name}: {row['error'] or 'roam/cut %.4f, meets bar %s' % (row['roam_over_cut'], row['meets_bar'])}",
              flush=True)
        write_summary(command.strip(), args.out, args.summary, args.table, names)  # a stopped run keeps them
    rows = write_summary(command.strip(), args.out, args.summary, args.table, names)
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
