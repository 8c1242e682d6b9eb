"""Peak memory of one PyTorch eager training step: the baseline roam-tvm is compared against.

``pytorch_peak(spec)`` returns ``{"peak_bytes", "method", "detail"}``:

* ``method == "measured"`` (a CUDA device): real steps on the GPU, ``torch.cuda.max_memory_allocated``.
  A warm-up step creates the optimizer states; the figure is the max over all steps (the warm-up step
  included, so the creation of the states is counted), each step starting with ``zero_grad(set_to_none=True)``.
  ``detail["reserved_bytes"]`` adds the caching allocator's fragmentation.
* ``method == "simulated"`` (no GPU, or ``device="meta"``): the step runs on ``meta`` tensors (no data, no
  compute, so GPT2-XL costs nothing) under a ``TorchDispatchMode`` that records every aten op in PyTorch's eager
  order: the whole forward, ``loss.backward()``, then ``optimizer.step()`` over all parameters. Memory is counted
  per *storage* (views and in-place results share their base's storage). The figure is the peak over that op
  sequence with perfect packing (no fragmentation):

  - parameters, buffers, inputs/targets and optimizer states are live for the whole step (steady state: the
    step recorded is the second one, after a warm-up step created the states, and after
    ``zero_grad(set_to_none=True)``);
  - a gradient stored in ``param.grad`` lives from its creation to the end of the step;
  - every other storage lives from the op that creates it to the last op that reads or writes it (through any
    view); an op's inputs and outputs are live together.

  This is a lower bound of what the CUDA caching allocator would report for the same order (PyTorch frees at
  refcount zero, which for autograd-saved tensors is when their backward node has run, i.e. about the last use).
  Host-side scalars (Adam's ``step`` counters on the CPU) are not counted.

``foreach`` picks the optimizer implementation: ``False`` (default here) is the per-parameter loop, ``True`` the
multi-tensor path that PyTorch picks by default on CUDA, which allocates temporaries for all parameters at once
(e.g. Adam with weight decay: a copy of every gradient plus ``sqrt(v)`` for every parameter).
"""
from __future__ import annotations

import contextlib
import copy
import time
from typing import Any, Dict, List, Optional

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

MIB = 1 << 20
#: A step that fake tensors cannot run is recorded on real CPU tensors when its parameters take at most this.
REAL_VALUES_MAX_PARAM_BYTES = 64 * MIB

__all__ = ["pytorch_peak", "simulate_eager_step", "measure_cuda_step", "meta_copy"]


def pytorch_peak(spec, device: Optional[str] = None, foreach: Optional[bool] = None, steps: int = 2) -> Dict[str, Any]:
    """Peak bytes of one eager PyTorch training step of ``spec`` (a ``roam_tvm.zoo.ModelSpec``).

    ``device=None`` measures on CUDA when a GPU is present and simulates otherwise; ``"cuda[:i]"`` forces a
    measurement, ``"meta"`` / ``"simulate"`` forces the simulation.
    """
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "meta"
    if device in ("meta", "simulate", "simulated", "cpu"):
        return simulate_eager_step(spec, foreach=bool(foreach))
    if str(device).startswith("cuda"):
        return measure_cuda_step(spec, device=device, foreach=foreach, steps=steps)
    raise ValueError(f"pytorch_peak: unsupported device {device!r} (use None, 'cuda' or 'meta')")


# --------------------------------------------------------------------------------------------------------------
# helpers


def meta_copy(model: torch.nn.Module, fake_mode=None) -> torch.nn.Module:
    """A copy of ``model`` whose parameters and buffers are ``meta`` tensors, or fake tensors of ``fake_mode``
    (no data is copied; tied parameters stay tied)."""

    def conv(t):
        m = t if t.is_meta else torch.empty_like(t, device="meta")
        return fake_mode.from_tensor(m, static_shapes=True) if fake_mode is not None else m

    memo = {}
    for p in model.parameters():
        if id(p) not in memo:
            memo[id(p)] = torch.nn.Parameter(conv(p.detach()), requires_grad=p.requires_grad)
    for b in model.buffers():
        if id(b) not in memo:
            memo[id(b)] = conv(b)
    return copy.deepcopy(model, memo)


def _storage(t: torch.Tensor):
    """(storage key, storage bytes, device type of the tensor) -- a fake tensor's storage is a meta storage, so
    the device is read from the tensor itself."""
    try:
        s = t.untyped_storage()
    except Exception:  # tensors without storage (sparse, nested, ...)
        return None
    return s._cdata, s.nbytes(), t.device.type


def _optimizer_state_tensors(opt: torch.optim.Optimizer) -> List[torch.Tensor]:
    out = []
    for state in opt.state.values():
        for v in state.values():
            if isinstance(v, torch.Tensor):
                out.append(v)
    return out


_IGNORED_NAMESPACES = ("prim", "profiler")
_METADATA_OPS = {getattr(torch.ops.aten, n) for n in ("sym_size", "sym_stride", "sym_numel", "sym_storage_offset",
                                                      "is_same_size", "_has_compatible_shallow_copy_type")
                 if hasattr(torch.ops.aten, n)}


class _Recorder(TorchDispatchMode):
    """Records, for every aten op, the storages it reads and writes (inputs) and returns (outputs)."""

    def __init__(self):
        super().__init__()
        self.recording = False
        self.keep: List[torch.Tensor] = []  # holds every tensor so storage addresses are never reused
        self.ops: List[str] = []
        self.reads: List[List[int]] = []
        self.writes: List[List[int]] = []
        self.size: Dict[int, int] = {}
        self.device: Dict[int, str] = {}

    def _keys(self, tensors):
        keys = []
        for t in tensors:
            if isinstance(t, torch.Tensor):
                info = _storage(t)
                if info is None:
                    continue
                key, nbytes, dev = info
                self.size[key] = max(nbytes, self.size.get(key, 0))
                self.device[key] = dev
                keys.append(key)
                self.keep.append(t)
        return keys

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func.namespace in _IGNORED_NAMESPACES or func.overloadpacket in _METADATA_OPS:
            return out  # metadata queries (prim.device, sym_size, ...) neither allocate nor use data
        if self.recording:
            ins, _ = tree_flatten((args, kwargs))
            outs, _ = tree_flatten(out)
            self.ops.append(str(func))
            self.reads.append(self._keys(ins))
            self.writes.append(self._keys(outs))
        else:
            # still keep the tensors so an address seen later always means the same storage
            outs, _ = tree_flatten(out)
            self.keep.extend(t for t in outs if isinstance(t, torch.Tensor))
        return out


class _FactoriesOn(torch.nn.Module):
    """Runs the forward with the step's device as the default one: a tensor the model makes
    without a device (``torch.arange(n)`` in a time embedding or RoPE) lands beside the inputs,
    as with ``torch.set_default_device``, not on the CPU where it cannot meet them."""

    def __init__(self, inner: torch.nn.Module, device):
        super().__init__()
        self.inner = inner
        self.device = device

    def forward(self, *args):
        with torch.device(self.device):
            return self.inner(*args)


def _run_step(wrapped, args, opt, marks: Optional[dict] = None, rec: Optional[_Recorder] = None):
    opt.zero_grad(set_to_none=True)
    if rec is not None:
        rec.recording = True
    loss = wrapped(*args)
    if marks is not None:
        marks["backward"] = len(rec.ops)
    loss.backward()
    if marks is not None:
        marks["optimizer"] = len(rec.ops)
    opt.step()
    if rec is not None:
        rec.recording = False
    return loss


# --------------------------------------------------------------------------------------------------------------
# simulation


def simulate_eager_step(spec, foreach: bool = False) -> Dict[str, Any]:
    """Simulated peak of the eager step (see the module docstring). Works on meta models (GPT2-XL).

    A step whose sizes depend on the values (``torch.where(mask)``, ``nonzero``, boolean-mask indexing: a
    MoE's token dispatch) cannot run on fake tensors; with real weights it is then recorded on real CPU
    tensors with the example data (the same order and counting; ``detail["values"]`` says so). So is any
    other step fake tensors fail on whose parameters take at most ``REAL_VALUES_MAX_PARAM_BYTES``.
    """
    from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException

    try:
        return _simulate(spec, foreach, real_values=False)
    except Exception as err:  # noqa: BLE001 - retried on real tensors where that is cheap, else re-raised
        params = list(spec.model.parameters())
        small = sum(p.numel() * p.element_size() for p in params) <= REAL_VALUES_MAX_PARAM_BYTES
        data_sized = isinstance(err, (DynamicOutputShapeException, DataDependentOutputException))
        if getattr(spec, "meta", False) or any(p.is_meta for p in params) or not (data_sized or small):
            raise
        # e.g. a forward patched with a closure over the model's own CPU tensors, which the meta copy misses
        return _simulate(spec, foreach, real_values=True)


def _simulate(spec, foreach: bool, real_values: bool) -> Dict[str, Any]:
    from roam_tvm.frontend.causal_mask import mask_hint_from_caller
    from roam_tvm.frontend.hf_experts import exportable_experts
    from roam_tvm.frontend.hf_rope import static_rope_updates
    from roam_tvm.report.eager_ctc import eager_ctc_sizes
    from roam_tvm.frontend.noop_casts import noop_module_casts
    from roam_tvm.zoo import LossWrapper, torch_optimizer

    t0 = time.perf_counter()
    # Fake tensors (meta storage underneath): no memory, no compute, and Hugging Face's data-dependent checks
    # (``.all()`` on masks) see a tracing tensor and take their trace-friendly branch.
    if real_values:  # every storage is the step's but the optimizer's step counters (host-side on a GPU)
        fake_mode, model = contextlib.nullcontext(), copy.deepcopy(spec.model)
        args = tuple(a.detach().clone() for a in spec.args)
    else:
        fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
        model = meta_copy(spec.model, fake_mode)
        # device "meta" marks step memory; fake tensors the optimizer makes on the CPU (step counters) are host-side
        args = tuple(fake_mode.from_tensor(torch.empty_like(a.detach(), device="meta"), static_shapes=True)
                     for a in spec.args)
    model.train()
    wrapped = _FactoriesOn(LossWrapper(model, spec.loss, len(spec.example_inputs)), "cpu" if real_values else "meta")
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch_optimizer(spec.optimizer, params, foreach=foreach)

    rec = _Recorder()
    # HF MoE layers run the experts form the step is imported with ("batched_mm"): the default
    # grouped_mm has no float32 fake-tensor kernel, and the eager loop depends on the data
    # as in the export: a module cast to its own dtype in forward (HF Switch's router) is a no-op
    # nn.Transformer's check that a mask is causal reads its values, which fake tensors lack: the
    # mask is applied as given (as in the export). CTC runs as its kernel's allocations.
    with fake_mode, rec, exportable_experts(model), noop_module_casts(), mask_hint_from_caller(), \
            eager_ctc_sizes(), static_rope_updates(model):  # its frequencies' values do not matter here
        _run_step(wrapped, args, opt)  # warm-up (not recorded): creates the optimizer states
        persistent_tensors = {
            "params": list(model.parameters()),
            "buffers": list(model.buffers()),
            "inputs": list(args),
            "optimizer_state": _optimizer_state_tensors(opt),
        }
        marks: Dict[str, int] = {}
        _run_step(wrapped, args, opt, marks=marks, rec=rec)
    grads = [p.grad for p in params if p.grad is not None]
    counters = {info[0] for st in opt.state.values() for k, v in st.items() if k == "step" and
                isinstance(v, torch.Tensor) and (info := _storage(v)) is not None}

    def host(key, device_type) -> bool:
        return key in counters if real_values else device_type == "cpu"

    n = len(rec.ops)
    category: Dict[int, str] = {}
    persistent_bytes = {k: 0 for k in persistent_tensors}
    for cat, tensors in persistent_tensors.items():
        for t in tensors:
            info = _storage(t)
            if info is None or host(info[0], info[2]) or info[0] in category:
                continue
            category[info[0]] = cat
            persistent_bytes[cat] += info[1]
    base = sum(persistent_bytes.values())

    created: Dict[int, int] = {}
    last: Dict[int, int] = {}
    for i in range(n):
        for key in rec.writes[i]:
            if key not in category and key not in created:
                created[key] = i
            last[key] = i
        for key in rec.reads[i]:
            last[key] = i
    untracked = {k for r in rec.reads for k in r if k not in category and k not in created}
    untracked_bytes = sum(rec.size[k] for k in untracked if not host(k, rec.device.get(k)))
    grad_keys = set()
    grad_bytes = 0
    for g in grads:
        info = _storage(g)
        if info is None or info[0] in category or info[0] in grad_keys:
            continue
        grad_keys.add(info[0])
        grad_bytes += info[1]
        last[info[0]] = n - 1  # .grad stays alive to the end of the step

    delta = [0] * (n + 1)
    grad_delta = [0] * (n + 1)
    for key, start in created.items():
        if host(key, rec.device.get(key)):
            continue
        size = rec.size[key]
        delta[start] += size
        delta[last[key] + 1] -= size
        if key in grad_keys:
            grad_delta[start] += size
            grad_delta[last[key] + 1] -= size
    fwd_end, bwd_end = marks.get("backward", n), marks.get("optimizer", n)
    live = base
    live_grads = 0
    peak, peak_at, grads_at_peak = base, -1, 0
    phase_peaks = {"forward": base, "backward": base, "optimizer": base}
    for i in range(n):
        live += delta[i]
        live_grads += grad_delta[i]
        ph = "forward" if i < fwd_end else "backward" if i < bwd_end else "optimizer"
        phase_peaks[ph] = max(phase_peaks[ph], live)
        if live > peak:
            peak, peak_at, grads_at_peak = live, i, live_grads
    phase = ("none" if peak_at < 0 else "forward" if peak_at < fwd_end else
             "backward" if peak_at < bwd_end else "optimizer")
    detail = {
        "params_bytes": persistent_bytes["params"],
        "buffers_bytes": persistent_bytes["buffers"],
        "inputs_bytes": persistent_bytes["inputs"],
        "optimizer_state_bytes": persistent_bytes["optimizer_state"],
        "grads_bytes": grad_bytes,
        "grads_at_peak_bytes": grads_at_peak,
        "activations_bytes": peak - base - grads_at_peak,  # activations + temporaries live at the peak
        "untracked_bytes": untracked_bytes,  # read but created before the step and not a param/state/input
        "peak_op": rec.ops[peak_at] if peak_at >= 0 else None,
        "peak_index": peak_at,
        "peak_phase": phase,
        "phase_peaks_bytes": phase_peaks,
        "num_ops": n,
        "num_forward_ops": fwd_end,
        "num_backward_ops": bwd_end - fwd_end,
        "num_optimizer_ops": n - bwd_end,
        "optimizer": spec.optimizer.kind,
        "foreach": bool(foreach),
        "order": "eager: forward, whole backward, optimizer step; perfect packing"
                 + ("; recorded on real CPU tensors (fake tensors could not run it)" if real_values else ""),
        "values": "real (example data)" if real_values else "none (fake tensors)",
        "seconds": round(time.perf_counter() - t0, 3),
    }
    rec.keep.clear()
    return {"peak_bytes": int(peak), "peak_mib": peak / MIB, "method": "simulated", "detail": detail}


# --------------------------------------------------------------------------------------------------------------
# measurement on a GPU


def measure_cuda_step(spec, device: str = "cuda", foreach: Optional[bool] = None, steps: int = 2) -> Dict[str, Any]:
    """Real eager steps on a CUDA device; ``peak_bytes`` = max of ``torch.cuda.max_memory_allocated`` over the
    steps (the first creates the optimizer states), params and inputs included."""
    from roam_tvm.zoo import LossWrapper, torch_optimizer

    if not torch.cuda.is_available():
        raise RuntimeError("measure_cuda_step needs a CUDA device")
    dev = torch.device(device)
    t0 = time.perf_counter()
    torch.cuda.synchronize(dev)
    torch.cuda.empty_cache()
    before = torch.cuda.memory_allocated(dev)
    if spec.meta:  # materialise: values do not matter for memory, only keep them finite
        model = copy.deepcopy(spec.model).to_empty(device=dev)
        with torch.no_grad():
            for p in model.parameters():
                p.normal_(0.0, 0.02)
            for b in model.buffers():
                if b.is_floating_point():
                    b.fill_(1.0)
                else:
                    b.zero_()
        args = tuple(torch.zeros(a.shape, dtype=a.dtype, device=dev) for a in spec.args)
    else:
        model = copy.deepcopy(spec.model).to(dev)
        args = tuple(a.to(dev) for a in spec.args)
    model.train()
    wrapped = _FactoriesOn(LossWrapper(model, spec.loss, len(spec.example_inputs)), dev)
    params = [p for p in model.parameters() if p.requires_grad]
    extra = {} if foreach is None else {"foreach": foreach}
    opt = torch_optimizer(spec.optimizer, params, **extra)
    torch.cuda.synchronize(dev)
    torch.cuda.reset_peak_memory_stats(dev)
    peaks, reserved = [], []
    for _ in range(max(1, steps)):
        torch.cuda.reset_peak_memory_stats(dev)
        _run_step(wrapped, args, opt)
        torch.cuda.synchronize(dev)
        peaks.append(torch.cuda.max_memory_allocated(dev) - before)
        reserved.append(torch.cuda.max_memory_reserved(dev))
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    state_bytes = sum(t.numel() * t.element_size() for t in _optimizer_state_tensors(opt) if t.device.type == "cuda")
    grad_bytes = sum(p.grad.numel() * p.grad.element_size() for p in params if p.grad is not None)
    input_bytes = sum(a.numel() * a.element_size() for a in args)
    peak = max(peaks)
    detail = {
        "params_bytes": param_bytes,
        "inputs_bytes": input_bytes,
        "optimizer_state_bytes": state_bytes,
        "grads_bytes": grad_bytes,
        "activations_bytes": peak - param_bytes - state_bytes - grad_bytes - input_bytes,  # upper estimate
        "step_peaks_bytes": peaks,
        "reserved_bytes": max(reserved),
        "optimizer": spec.optimizer.kind,
        "foreach": foreach,
        "device": torch.cuda.get_device_name(dev),
        "seconds": round(time.perf_counter() - t0, 3),
    }
    del opt, wrapped, model, args
    torch.cuda.empty_cache()
    return {"peak_bytes": int(peak), "peak_mib": peak / MIB, "method": "measured", "detail": detail}
