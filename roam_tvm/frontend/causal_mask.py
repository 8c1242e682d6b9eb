"""``nn.Transformer*`` layers given a float causal ``mask`` / ``tgt_mask``, made traceable.

``nn.TransformerEncoder`` / ``nn.TransformerDecoder`` (so ``nn.Transformer``) ask
``_detect_is_causal_mask`` whether the mask they got is the causal one, by comparing its
*values* with ``generate_square_subsequent_mask`` and calling ``bool()`` on the result.
Under ``torch.export`` that is a branch on tensor values ("Could not guard on data-dependent
expression"). The answer is only a hint: with ``False`` the layers apply the mask as given,
which is what the mask says whatever its values (``True`` would let attention drop the mask
for a built-in causal pattern, the same result for a causal mask). While tracing,
:func:`mask_hint_from_caller` answers the caller's own ``is_causal`` (``tgt_is_causal=True``
still means causal) and ``False`` when the caller gave none.
"""
from __future__ import annotations

import contextlib


@contextlib.contextmanager
def mask_hint_from_caller():
    """While active, ``nn.Transformer*`` layers trust their ``is_causal`` argument instead of
    reading the mask's values (see the module docstring)."""
    from torch.nn.modules import transformer

    original = transformer._detect_is_causal_mask

    def detect(mask, is_causal=None, size=None) -> bool:
        return is_causal is True

    transformer._detect_is_causal_mask = detect
    try:
        yield
    finally:
        transformer._detect_is_causal_mask = original
