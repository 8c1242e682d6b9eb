"""Relax import of an exported program with TVM's PyTorch importer, and its scoped fixes."""

from __future__ import annotations

import contextlib
import io
import re
import warnings

import tvm
from tvm import relax

from .converters import CONVERTERS
from .add_alpha import fold_add_alpha
from .ep_asserts import decompose_without_asserts
from .mutated_buffers import carry_mutated_buffers
from .no_grad_regions import detach_no_grad_outputs
from .errors import FrontendError, ImportError_
from .precision import mixed_norm
from .torch_params import is_meta
from .view_reshapes import views_as_reshapes

def _fix_out_dtype(fn):
    """Wrap a Relax op constructor whose TVM converter hard-codes ``out_dtype="float32"``.

    TVM 0.27's PyTorch importer builds ``addmm``/``mm``/conv with ``out_dtype="float32"``
    whatever the input dtype, so a float64 (or float16) model fails to import with
    "Binary operators must have the same datatype". The wrapper keeps the input dtype.
    """
    import functools

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        if kwargs.get("out_dtype") == "float32" and args:
            dt = str(getattr(getattr(args[0], "ty", None), "dtype", "float32"))
            if dt.startswith(("float", "bfloat")) and dt != "float32":
                kwargs["out_dtype"] = dt
        return fn(*args, **kwargs)

    wrapped.__roam_wrapped__ = fn
    return wrapped

@contextlib.contextmanager
def _patched_importer(ep, meta: bool):
    """Scoped fixes of TVM's importer: dtype-preserving matmul/conv; meta weights.

    With ``meta`` weights the importer would copy every parameter and buffer into a TVM
    tensor ("Cannot copy out of meta tensor"). Parameters become inputs of the function
    (their values are dropped by ``detach_params`` anyway), so they get a 1-element dummy;
    buffers (e.g. BatchNorm stats, masks) become uninitialised tensors of the right shape,
    which is enough for a module built from shapes only.
    """
    from tvm.relax.frontend.torch import exported_program_translator as ept

    patches = []

    def patch(obj, name, value):
        # save the raw attribute (a staticmethod object for classes), not the bound one
        raw = obj.__dict__[name] if isinstance(obj, type) else getattr(obj, name)
        patches.append((obj, name, raw))
        setattr(obj, name, value)

    patch(relax.op.linear_algebra, "matmul", _fix_out_dtype(relax.op.linear_algebra.matmul))
    for name in ("conv1d", "conv2d", "conv3d", "conv1d_transpose", "conv2d_transpose"):
        if hasattr(relax.op.nn, name):
            patch(relax.op.nn, name, _fix_out_dtype(getattr(relax.op.nn, name)))
    for name in ("layer_norm", "group_norm", "batch_norm"):  # autocast: bf16 x, fp32 gamma
        patch(relax.op.nn, name, mixed_norm(getattr(relax.op.nn, name)))
    if meta:
        orig = ept.ExportedProgramImporter._convert_pytorch_tensor_to_tvm
        param_ids = {id(p) for _, p in ep.named_parameters()}

        def convert(tensor_value):
            if is_meta(tensor_value):
                if id(tensor_value) in param_ids:
                    return tvm.runtime.empty((1,), str(tensor_value.dtype).replace("torch.", ""))
                return tvm.runtime.empty(tuple(int(d) for d in tensor_value.shape),
                                         str(tensor_value.dtype).replace("torch.", ""))
            return orig(tensor_value)

        patch(ept.ExportedProgramImporter, "_convert_pytorch_tensor_to_tvm", staticmethod(convert))
    try:
        yield
    finally:
        for obj, name, value in reversed(patches):
            setattr(obj, name, value)

def _import_ep(ep, meta: bool, handled_buffers: set) -> tuple[tvm.IRModule, list]:
    from tvm.relax.frontend import detach_params
    from tvm.relax.frontend.torch import from_exported_program

    views_as_reshapes(ep)  # decompositions may change strides a traced view relied on
    detach_no_grad_outputs(ep)  # the decompositions inline no_grad blocks and lose their grad mode
    ep, decomposed = decompose_without_asserts(ep)  # torch's run-time value checks out
    carried = []
    if decomposed:
        fold_add_alpha(ep)  # TVM's add / sub converters drop alpha
        ep, carried = carry_mutated_buffers(ep, handled_buffers)  # buffer updates are outputs once functionalised
    with _patched_importer(ep, meta):
        mod = from_exported_program(ep, run_ep_decomposition=not decomposed, keep_params_as_input=True,
                                    unwrap_unit_return_tuple=True,
                                    custom_convert_map=CONVERTERS)
    mod, _ = detach_params(mod)
    return mod, carried

def import_exported(ep, meta: bool, model_name: str,
                    handled_buffers: set = frozenset()) -> tuple[relax.Function, list]:
    """The exported program as a Relax function ``main`` (parameters as inputs, no weights).

    Parameters
    ----------
    ep : torch.export.ExportedProgram
        Model and loss, exported.
    meta : bool
        The weights are on the ``meta`` device (or fake): import from shapes only.
    model_name : str
        The model's class name, for messages.
    handled_buffers : set of str
        Buffers (as the program names them) whose in-place updates the step makes itself (BatchNorm's
        statistics); every other updated buffer is carried (``mutated_buffers.py``).

    Returns
    -------
    (relax.Function, list of (str, str))
        ``main``, and each carried buffer's ``(parameter name, buffer name)``: ``main`` takes them as
        inputs and returns their new values after the loss, in this order.
    """
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mod, carried = _import_ep(ep, meta, set(handled_buffers))
            return mod["main"], carried
    except FrontendError:
        raise
    except Exception as e:  # noqa: BLE001
        raise ImportError_(
            f"TVM's PyTorch importer failed on {model_name}: {type(e).__name__}: "
            f"{_reason(e)[:400]}. If an op is unsupported, rewrite it in the model or register a "
            "converter in tvm.relax.frontend.torch.") from None


def _reason(e: Exception) -> str:
    """The line of an import error that says what failed.

    TVM's errors end with it. torch's (raised while the importer re-runs torch's decompositions) start
    with it and go on with the node and the model's traceback, then a tlparse hint: there the first line
    is taken, with the node and the model's innermost source line.
    """
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    if not lines:
        return type(e).__name__
    node = next((ln for ln in lines if ln.startswith("While executing ")), None)
    if node is None:
        return next((ln for ln in reversed(lines) if "tlparse" not in ln), lines[-1])
    name = node[len("While executing "):].split(" ")[0]
    target = re.search(r"target=([^\]]+)\]", node)
    files = [i for i, ln in enumerate(lines) if ln.startswith("File ")]
    where = f"; at {lines[files[-1]]}: {lines[files[-1] + 1]}" if files and files[-1] + 1 < len(lines) else ""
    return f"{lines[0]} (node {name}{', ' + target.group(1) if target else ''}{where})"
