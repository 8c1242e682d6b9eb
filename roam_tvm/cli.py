"""``roam-tvm``: compare planners, write plans, solve layout instances.

    roam-tvm compare --model resnet18 --batch 8 --json out.json
    roam-tvm compare --model path/to/file.py:factory
    roam-tvm plan --model mlp --out plan/
    roam-tvm layout instance.csv --time-limit 10 --output solved.csv
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

from .report.names import ALL_PLANNERS

EXIT_BAD_INPUT = 2
EXIT_TVM_FAILURE = 1  # TVM could not lower a valid model: not bad input, not silent


class ArgumentCheckError(ValueError):
    """A command-line value that is wrong before any work starts (a path, mostly)."""


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive finite number, got {text}")
    return value


def _nearest_existing(path: str) -> str:
    path = os.path.abspath(path)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return path


def check_out_dir(path: str) -> None:
    """Raise ArgumentCheckError unless ``path`` is (or can be made) a writable folder."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise ArgumentCheckError(f"--out {path!r} is an existing file; give a folder (it is created if missing)")
    base = _nearest_existing(path)
    if not os.path.isdir(base):
        raise ArgumentCheckError(f"--out {path!r} lies inside {base!r}, which is a file, not a folder")
    if not os.access(base, os.W_OK | os.X_OK):
        raise ArgumentCheckError(f"--out {path!r}: no permission to write in {base!r}")


def check_out_file(path: str, flag: str) -> None:
    """Raise ArgumentCheckError unless ``path`` can be written as a file (its folder exists)."""
    if os.path.isdir(path):
        raise ArgumentCheckError(f"{flag} {path!r} is a folder; give a file name")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        base = _nearest_existing(folder)
        what = "is a file" if not os.path.isdir(base) else "does not exist"
        raise ArgumentCheckError(f"{flag} {path!r}: the folder {folder!r} {what}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ArgumentCheckError(f"{flag} {path!r}: no permission to write in {folder!r}")


def _budget(text: str):
    from .remat.budget import parse_budget

    try:
        return parse_budget(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def _is_factory(model: str) -> bool:
    return ":" in model and model.rsplit(":", 1)[0].endswith(".py")


def _check_args(args) -> None:
    """Checks before the import (minutes on big models), so nothing is lost or half-written."""
    model = getattr(args, "model", None) or ""
    if _is_factory(model):
        if not os.path.isfile(model.rsplit(":", 1)[0]):
            raise ArgumentCheckError(f"--model {model!r}: the file {model.rsplit(':', 1)[0]!r} does not exist")
        given = [f"--{k}" for k in ("batch", "seq", "image", "small") if getattr(args, k, None)]
        if given:
            verb = "does" if len(given) == 1 else "do"
            raise ArgumentCheckError(f"{', '.join(given)} {verb} not apply to a factory model: its example "
                                     "tensors set the sizes (use the factory's dynamic_shapes for a range)")
    if getattr(args, "loss_scale", None) is not None and getattr(args, "precision", None) != "fp16-amp":
        raise ArgumentCheckError("--loss-scale applies to --precision fp16-amp only (bf16 needs no loss scaling)")
    if getattr(args, "out", None) is not None:
        check_out_dir(args.out)
    if getattr(args, "json", None) is not None:
        check_out_file(args.json, "--json")


def _add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True,
                   help="a zoo model name (see `roam-tvm models`) or path/to/file.py:factory")
    p.add_argument("--batch", type=_positive_int, default=None, help="batch size (default: the model's)")
    p.add_argument("--seq", type=_positive_int, default=None, help="sequence length for text models")
    p.add_argument("--image", type=_positive_int, default=None, help="image size for vision models")
    p.add_argument("--optimizer", choices=["sgd", "momentum", "adam", "adamw"], default=None,
                   help="optimizer (default: the model's own, e.g. Adam for gpt2-xl-paper)")
    p.add_argument("--lr", type=_positive_float, default=None, help="learning rate (default: the model's)")
    p.add_argument("--loss", choices=["cross_entropy", "mse"], default=None,
                   help="override the model's loss (cross_entropy: classes in dim 1, as F.cross_entropy; "
                        "[B, T, V] logits with [B, T] targets: classes last)")
    p.add_argument("--precision", choices=["bf16-amp", "fp16-amp"], default=None,
                   help="mixed precision: autocast activations and gradients, fp32 master weights and "
                        "optimizer state (fp16: static loss scale); default: train the model in its own dtypes")
    p.add_argument("--loss-scale", type=_positive_float, default=None,
                   help="static loss scale for fp16-amp (default 1024)")
    p.add_argument("--small", action="store_true", help="the model's tiny test configuration")
    p.add_argument("--target", default="cuda", choices=["cuda", "llvm"],
                   help="target whose lowering is planned (default cuda; nothing is executed)")
    p.add_argument("--time-limit", type=_positive_float, default=10.0, help="solver seconds per piece (> 0)")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.add_argument("--debug", action="store_true", help="show the full traceback of an error")


def optimizer_from_config(cfg):
    """The zoo's ``OptimizerConfig`` -> the frontend's optimizer (same torch.optim semantics)."""
    from .frontend import SGD, Adam, AdamW

    if cfg.kind in ("sgd", "momentum"):
        return SGD(lr=cfg.lr, momentum=cfg.momentum if cfg.kind == "momentum" else 0.0,
                   weight_decay=cfg.weight_decay)
    cls = Adam if cfg.kind == "adam" else AdamW
    return cls(lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.eps, weight_decay=cfg.weight_decay)


def load_step(args):
    """Zoo spec or user factory -> (TrainingStep, spec)."""
    from . import zoo

    if _is_factory(args.model):
        spec = zoo.load_factory(args.model)
    else:
        meta = (zoo.MODELS[args.model].needs_meta_for_default and not args.small) if args.model in zoo.MODELS else False
        spec = zoo.get_model(args.model, batch=args.batch, seq=args.seq, image=args.image,
                             small=args.small, meta=meta)
    cfg = spec.optimizer
    if args.optimizer or args.lr:
        from dataclasses import replace

        cfg = replace(cfg, **{k: v for k, v in (("kind", args.optimizer), ("lr", args.lr)) if v},
                      **({"momentum": 0.0} if args.optimizer == "sgd" else {}))  # --optimizer sgd: plain SGD
        spec.optimizer = cfg
    if args.loss and not spec.targets:
        raise ArgumentCheckError(
            f"--loss {args.loss}: {args.model} returns no targets (its model computes its own loss, read by "
            "the factory's loss callable), so there is nothing to apply that loss to; drop --loss, or have the "
            "factory return targets")
    if args.loss:
        spec.loss = args.loss
        spec.config["loss"] = args.loss
    from .frontend import from_torch  # TVM loads only once the model is known to be sound

    bounds = spec.config.get("dynamic_bounds")
    if bounds:  # say it even when quiet: the plan holds for these sizes and below
        _log("dynamic dims planned at their upper bounds: " + ", ".join(f"{k}={v}" for k, v in bounds.items()))
    if not args.quiet:
        _log(f"importing {spec.name} {spec.config} ({cfg.kind}) ...")
    start = time.perf_counter()
    ts = from_torch(spec.model, spec.example_inputs, spec.targets, loss=spec.loss,
                    optimizer=optimizer_from_config(cfg), quiet=args.quiet,
                    precision=getattr(args, "precision", None), loss_scale=getattr(args, "loss_scale", None))
    if not args.quiet:
        _log(f"imported in {time.perf_counter() - start:.1f} s")
    return ts, spec


def cmd_compare(args) -> int:
    from .report.compare import compare_step, format_table
    from .zoo.spec import loss_name

    planners = args.planners or list(ALL_PLANNERS)
    start = time.perf_counter()
    ts, spec = load_step(args)
    import_seconds = time.perf_counter() - start

    def pytorch():
        from .report.pytorch_peak import pytorch_peak

        res = pytorch_peak(spec)
        precision = getattr(args, "precision", None)
        if precision and res.get("method") == "simulated":
            # the simulation runs on fake tensors, where autocast does not apply: say so in the
            # report rather than compare an AMP step with an fp32 one silently
            detail = res.setdefault("detail", {})
            detail["order"] = (detail.get("order") or res.get("note", "")) + \
                f"; PyTorch's step in fp32: {precision} autocast is not simulated"
            _log(f"note: the simulated PyTorch step runs in fp32 ({precision} is not simulated for it)")
        return res

    report = compare_step(ts, planners, target=args.target, pytorch=pytorch, cut=not args.no_cut,
                          order_options={"time_limit": args.time_limit, "progress": not args.quiet},
                          layout_options={"time_limit": args.time_limit},
                          progress=not args.quiet, log=None if args.quiet else _log)
    budget_refused = None
    if args.budget is not None:  # the budgeted roam planner (recomputation), see roam_tvm.remat.compare
        from .remat.compare import budget_report
        from .remat.floor import BudgetError

        try:
            extra = budget_report(ts, args.budget, args.target,
                                  report["planners"].get("roam", {}).get("peak_bytes"),
                                  {"time_limit": args.time_limit}, {"time_limit": args.time_limit})
            report["planners"]["roam-budget"] = extra.pop("planner")
            report.update(extra)
        except BudgetError as err:  # the other planners' report still stands; the budget is refused
            budget_refused = str(err)
            report["planners"]["roam-budget"] = {"peak_bytes": None, "valid": None, "plan_seconds": 0.0,
                                                 "method": "refused (below the floor)", "error": budget_refused}
    report = {"model": spec.name, "config": {**spec.config, "optimizer": spec.optimizer.kind,
                                             "lr": spec.optimizer.lr, "loss": loss_name(spec.loss),
                                             "precision": getattr(args, "precision", None),
                                             "loss_scale": ts.loss_scale, "target": args.target},
              **report, "import_seconds": import_seconds,
              "command": "roam-tvm " + " ".join(sys.argv[1:])}
    print(f"{spec.name} {spec.config}: {report['ops']} ops in train_step, "
          f"{report.get('planned_ops', 0)} after fusion, always live {report.get('always_live_bytes', 0) / 2**20:,.1f} MiB")
    print(format_table(report))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
        print(f"wrote {args.json}")
    if budget_refused:
        _log(f"roam-tvm: error: --budget: {budget_refused}")
        return 2
    return 0


def cmd_models(_args) -> int:
    from . import zoo

    for name, info in zoo.MODELS.items():
        print(f"{name:16s} {info.description}")
    return 0


def cmd_layout(argv: list[str]) -> int:
    from .layout.cli import layout_main

    return layout_main(argv)


def cmd_plan(args) -> int:
    from .report.plan import write_plan

    ts, spec = load_step(args)
    paths = write_plan(ts, args.out, target=args.target, time_limit=args.time_limit, progress=not args.quiet)
    for p in paths:
        print(f"wrote {p}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="roam-tvm", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compare", help="peak memory of one training step under each planner")
    _add_model_args(c)
    c.add_argument("--planners", nargs="+", default=None, choices=ALL_PLANNERS, metavar="PLANNER",
                   help="subset of: " + " ".join(ALL_PLANNERS))
    c.add_argument("--json", default=None, help="write the report as JSON here")
    c.add_argument("--no-cut", action="store_true", help="skip the cut lower bound")
    c.add_argument("--budget", type=_budget, default=None,
                   help="also plan roam with recomputation under this budget: bytes (8GiB, 512MiB, 123456) "
                        "or a fraction in (0, 1] of roam's unbudgeted peak")
    c.set_defaults(func=cmd_compare)
    p = sub.add_parser("plan", help="write the roam plan as JSON, minimalloc CSV and a timeline PNG")
    _add_model_args(p)
    p.add_argument("--out", default="roam-plan", help="output folder")
    p.set_defaults(func=cmd_plan)
    m = sub.add_parser("models", help="list the built-in models")
    m.set_defaults(func=cmd_models)
    sub.add_parser("layout", help="solve a minimalloc CSV instance (see `roam-tvm layout --help`)",
                   add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "layout":
        return cmd_layout(argv[1:])
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # argparse printed usage and the message (exit 2) or --help (exit 0)
        return e.code if isinstance(e.code, int) else EXIT_BAD_INPUT
    try:
        _check_args(args)
        return args.func(args)
    except KeyboardInterrupt:
        return 130
    except Exception as err:  # noqa: BLE001 - turn known bad input into one clear line
        if _is_user_error(err):
            if getattr(args, "debug", False):
                import traceback

                traceback.print_exc()
            print(f"roam-tvm: error: {err}", file=sys.stderr)
            return EXIT_BAD_INPUT
        if _is_unschedulable(err):  # a kernel with no GPU schedule: the message names it
            if getattr(args, "debug", False):
                import traceback

                traceback.print_exc()
            print(f"roam-tvm: error: {err} (or rerun with --target llvm)", file=sys.stderr)
            return EXIT_TVM_FAILURE
        if _is_tvm_error(err):
            if getattr(args, "debug", False):
                import traceback

                traceback.print_exc()
            print(f"roam-tvm: error: {_tvm_error_line(err)}", file=sys.stderr)
            return EXIT_TVM_FAILURE
        raise


def _is_unschedulable(err: Exception) -> bool:
    mod = sys.modules.get(__package__ + ".runtime.schedule")
    return mod is not None and isinstance(err, mod.UnschedulableError)


def _is_tvm_error(err: Exception) -> bool:
    """An error raised inside TVM (its C++ checks, its Python passes) while lowering the step:
    a TVM error class, or any exception whose innermost Python frames are TVM's, not ours."""
    import os
    import traceback

    if type(err).__module__.split(".")[0] in ("tvm", "tvm_ffi"):
        return True
    ours = os.path.dirname(os.path.abspath(__file__))
    for frame in reversed(traceback.extract_tb(err.__traceback__)):
        path = os.path.abspath(frame.filename) if not frame.filename.startswith("<") else frame.filename
        if path.startswith(ours):
            return False
        if f"{os.sep}tvm{os.sep}" in path or "tvm_ffi" in path or path.endswith((".cc", ".h")):
            return True
    return False


def _tvm_error_line(err: Exception) -> str:
    """TVM's own message (the check that failed), in one line, and what the user can do."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    # TVM puts its traceback first and the failed check last
    reason = next((ln for ln in reversed(lines) if not ln.startswith(("File ", "at "))), "")
    return (f"TVM failed while lowering the training step: {type(err).__name__}: {reason[:500]}. "
            "This model uses an op or shape TVM 0.27 cannot compile here; rerun with --debug for "
            "the full traceback, and report it with the model (or rewrite the op the message names).")


def _is_user_error(err: Exception) -> bool:
    """Bad input (exit 2, one line) as opposed to a bug of ours (a traceback)."""
    if isinstance(err, (ArgumentCheckError, FileNotFoundError)):
        return True
    mods = sys.modules  # an error class whose module never loaded cannot have been raised
    kinds = [(".frontend.errors", "FrontendError"), (".zoo.spec", "ZooError"), (".passes.extract", "ExtractError"),
             (".graph.model", "GraphError"), (".remat.floor", "BudgetError")]
    classes = tuple(getattr(mods[__package__ + m], n) for m, n in kinds if __package__ + m in mods)
    return isinstance(err, classes)


if __name__ == "__main__":
    sys.exit(main())
