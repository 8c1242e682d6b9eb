"""``F.grid_sample`` (bilinear, 2-D) written in ops that import and differentiate.

``torch.export`` leaves ``grid_sampler_2d`` as one op whose TVM 0.27 import reads the grid
with the wrong layout ("Reshape expects ... [2, 1, 4, 2] ... [2, 16]"), and Relax has no
gradient for it. Here the sampling is spelled out as PyTorch defines it:

* the grid's ``(x, y)`` in ``[-1, 1]`` map to pixel coordinates
  ``(g + 1) / 2 * (size - 1)`` with ``align_corners=True`` (-1 and 1 are the corner pixels'
  centres) or ``((g + 1) * size - 1) / 2`` with ``False`` (their outer edges);
* each output takes the four pixels around that point, weighted by the bilinear weights
  ``(1 - fx, fx) x (1 - fy, fy)``; ``padding_mode="zeros"`` counts a pixel outside the
  image as 0 (its weight is multiplied by an in-bounds mask), ``"border"`` first clamps the
  coordinate into the image (its gradient is then 0 outside, as PyTorch's).

The four pixels are one ``take`` of the channels-last image by flat row index
``(n * H + y) * W + x``, so the backward scatters each output gradient into at most four
pixels, and the gradient with respect to the grid flows through the weights (``floor`` is
constant between pixels).
"""
from __future__ import annotations

from .errors import UnsupportedError


def _pixel(g, size: int, align_corners: bool):
    if align_corners:
        return (g + 1) * ((size - 1) / 2)
    return ((g + 1) * size - 1) / 2


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """``F.grid_sample`` for 4-D input, bilinear, zeros or border padding.

    Raises
    ------
    UnsupportedError
        Another mode, padding mode or rank (with the way out in the message).
    """
    import torch

    if mode != "bilinear" or padding_mode not in ("zeros", "border") or input.dim() != 4:
        raise UnsupportedError(
            f"grid_sample(mode={mode!r}, padding_mode={padding_mode!r}) on a {input.dim()}-D input: "
            "only 4-D input with mode='bilinear' and padding_mode 'zeros' or 'border' is supported; "
            "use those settings, or write the sampling in the model with gather and arithmetic")
    align = bool(align_corners)
    if torch.is_autocast_enabled(input.device.type):  # autocast runs grid_sampler in float32
        input, grid = input.float(), grid.float()
    n, c, h, w = input.shape
    ho, wo = grid.shape[1], grid.shape[2]
    ix = _pixel(grid[..., 0], w, align)  # [N, Ho, Wo]
    iy = _pixel(grid[..., 1], h, align)
    if padding_mode == "border":
        ix, iy = ix.clamp(0, w - 1), iy.clamp(0, h - 1)
    x0, y0 = torch.floor(ix).detach(), torch.floor(iy).detach()
    fx, fy = ix - x0, iy - y0
    batch = torch.arange(n, device=input.device).reshape(n, 1, 1) * h
    rows, weights = [], []
    for dy, wy in ((0, 1 - fy), (1, fy)):
        for dx, wx in ((0, 1 - fx), (1, fx)):
            xs, ys = x0 + dx, y0 + dy
            inside = (xs >= 0) & (xs <= w - 1) & (ys >= 0) & (ys <= h - 1)
            xi = xs.clamp(0, w - 1).long()
            yi = ys.clamp(0, h - 1).long()
            rows.append(((batch + yi) * w + xi).reshape(-1))
            weights.append((wx * wy * inside.to(input.dtype)).reshape(-1, 1))
    pixels = input.permute(0, 2, 3, 1).reshape(n * h * w, c)
    taps = pixels[torch.stack(rows)]  # [4, N*Ho*Wo, C]
    out = (taps * torch.stack(weights)).sum(0)  # [N*Ho*Wo, C]
    # PyTorch's strides: a channels-last result (which .contiguous() keeps when C == 1) makes
    # the convolutions after it channels-last too, and a later .view() fails in the trace
    return out.reshape(n, ho, wo, c).permute(0, 3, 1, 2).clone(
        memory_format=torch.contiguous_format)
