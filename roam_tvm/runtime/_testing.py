"""Small training-like Relax modules for runtime tests (no dependency on the frontend).

``cnn_training_module()``: torch.export of conv -> relu -> max_pool2d -> linear -> mse
loss, imported with ``run_ep_decomposition=True, keep_params_as_input=True`` and
differentiated with ``relax.transform.Gradient`` (functions ``main`` and
``main_adjoint``; the adjoint returns ``(loss, (grads...))``). It contains the two
kernels that break TVM's stock CUDA schedule: ``max_pool2d_backward`` (GeneralReduction
schedules it but it does not lower) and ``mean`` (dl.gpu.Reduction raises).
"""

from __future__ import annotations

import numpy as np


def _torch_cnn(channels: int, classes: int, image: int):
    import torch  # pylint: disable=import-outside-toplevel

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, channels, 3, padding=1)
            self.fc = torch.nn.Linear(channels * (image // 2) ** 2, classes)

        def forward(self, x, y):
            h = torch.nn.functional.max_pool2d(torch.relu(self.conv(x)), 2)
            out = self.fc(h.flatten(1))
            return torch.nn.functional.mse_loss(out, y)

    return Net()


def _torch_mlp(inp: int, hidden: int, classes: int):
    import torch  # pylint: disable=import-outside-toplevel

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(inp, hidden)
            self.fc2 = torch.nn.Linear(hidden, classes)

        def forward(self, x, y):
            out = self.fc2(torch.relu(self.fc1(x)))
            return torch.nn.functional.mse_loss(out, y)

    return Net()


def _import_and_differentiate(net, example_inputs, num_inputs: int):
    import torch  # pylint: disable=import-outside-toplevel
    from tvm import relax  # pylint: disable=import-outside-toplevel
    from tvm.relax.frontend.torch import from_exported_program  # pylint: disable=import-outside-toplevel

    torch.manual_seed(0)
    net = net.train()
    ep = torch.export.export(net, example_inputs)
    mod = from_exported_program(
        ep, run_ep_decomposition=True, keep_params_as_input=True, unwrap_unit_return_tuple=True
    )
    mod, params = relax.frontend.detach_params(mod)
    mod = relax.transform.DeadCodeElimination()(mod)
    mod = relax.transform.DecomposeOpsForTraining()(mod)
    func = mod["main"]
    mod = relax.transform.Gradient("main", require_grads=list(func.params[num_inputs:]))(mod)
    weights = [p.numpy() for p in params["main"]]
    return mod, weights


def cnn_training_module(batch: int = 2, channels: int = 8, image: int = 8, classes: int = 10):
    """(mod, inputs) where inputs = [x, y, *weights] as numpy arrays for ``main_adjoint``."""
    import torch  # pylint: disable=import-outside-toplevel

    torch.manual_seed(0)
    net = _torch_cnn(channels, classes, image)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, 3, image, image), dtype=np.float32)
    y = rng.standard_normal((batch, classes), dtype=np.float32)
    mod, weights = _import_and_differentiate(net, (torch.from_numpy(x), torch.from_numpy(y)), 2)
    return mod, [x, y, *weights]


def mlp_training_module(batch: int = 4, inp: int = 16, hidden: int = 32, classes: int = 8):
    """(mod, inputs) where inputs = [x, y, *weights] as numpy arrays for ``main_adjoint``."""
    import torch  # pylint: disable=import-outside-toplevel

    torch.manual_seed(0)
    net = _torch_mlp(inp, hidden, classes)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, inp), dtype=np.float32)
    y = rng.standard_normal((batch, classes), dtype=np.float32)
    mod, weights = _import_and_differentiate(net, (torch.from_numpy(x), torch.from_numpy(y)), 2)
    return mod, [x, y, *weights]
