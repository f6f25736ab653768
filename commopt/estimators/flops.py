"""FLOP counts of the matmul and attention ops, without importing torch.

The analytical estimator counts FLOPs with the formulas of torch's flop counter
(``torch.utils.flop_counter.flop_registry``). Importing it imports torch: about 1.5 s and
170 MB on every run, where a JSON graph needs nothing else from torch. The ops that make up
nearly all of a transformer's FLOPs (matmuls and the dense scaled-dot-product attention
kernels) have short formulas, written here as torch writes them: same counts, and the same
argument checks (a formula that cannot read the arguments raises, and the estimator treats
the node as memory-bound). ``tests/estimators/test_flops.py`` compares every formula with
torch's on the sample and corpus graphs' shapes and on random ones. The other ops of
:data:`~commopt.estimators.analytical.HEAVY_OPS` (convolutions, nested-tensor and flex
attention) still use torch's registry.

Each formula takes the node's arguments with every tensor replaced by its shape (a tuple),
as torch's ``shape_wrapper`` passes them, and ``out_shape``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def mm_flops(a_shape: Any, b_shape: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """``aten.mm``: 2 * m * n * k."""
    m, k = a_shape
    k2, n = b_shape
    if k != k2:
        raise ValueError(f"matmul: inner dimensions differ ({k} and {k2})")
    return m * n * 2 * k


def addmm_flops(self_shape: Any, a_shape: Any, b_shape: Any, out_shape: Any = None,
                **kwargs: Any) -> int:
    """``aten.addmm``: the matmul's count (the addition is not counted)."""
    return mm_flops(a_shape, b_shape)


def bmm_flops(a_shape: Any, b_shape: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """``aten.bmm``: 2 * b * m * n * k."""
    b, m, k = a_shape
    b2, k2, n = b_shape
    if b != b2:
        raise ValueError(f"bmm: batch dimensions differ ({b} and {b2})")
    if k != k2:
        raise ValueError(f"bmm: inner dimensions differ ({k} and {k2})")
    return b * m * n * 2 * k


def baddbmm_flops(self_shape: Any, a_shape: Any, b_shape: Any, out_shape: Any = None,
                  **kwargs: Any) -> int:
    """``aten.baddbmm``: the batched matmul's count."""
    return bmm_flops(a_shape, b_shape)


def scaled_mm_flops(a_shape: Any, b_shape: Any, scale_a_shape: Any, scale_b_shape: Any,
                    bias_shape: Any = None, scale_result_shape: Any = None, out_dtype: Any = None,
                    use_fast_accum: Any = False, out_shape: Any = None, **kwargs: Any) -> int:
    """``aten._scaled_mm``: the matmul's count."""
    return mm_flops(a_shape, b_shape)


def sdpa_flops(query_shape: Any, key_shape: Any, value_shape: Any, *args: Any,
               out_shape: Any = None, **kwargs: Any) -> int:
    """Dense scaled-dot-product attention forward (grouped-query heads broadcast): scores
    q @ k^T, then scores @ v; causal masking is not discounted."""
    b, h_q, s_q, d_q = query_shape
    b2, h_kv, s_k, d_k = key_shape
    b3, h_v, s_v, d_v = value_shape
    if not (b == b2 == b3 and h_kv == h_v and d_q == d_k and s_k == s_v):
        raise ValueError(f"sdpa: incompatible query/key/value shapes {query_shape}, {key_shape}, "
                         f"{value_shape}")
    _check_heads(h_q, h_kv)
    bh = b * h_q
    return bmm_flops((bh, s_q, d_q), (bh, d_q, s_k)) + bmm_flops((bh, s_q, s_k), (bh, s_k, d_v))


def sdpa_backward_flops(grad_out_shape: Any, query_shape: Any, key_shape: Any, value_shape: Any,
                        *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """Dense scaled-dot-product attention backward: the scores recomputed, then the gradients
    of scores @ v (two matmuls) and of q @ k^T (two)."""
    b, h_q, s_q, d_q = query_shape
    b2, h_kv, s_k, d_k = key_shape
    b3, h_v, s_v, d_v = value_shape
    b4, h_g, s_g, d_g = grad_out_shape
    if not (b == b2 == b3 == b4 and h_kv == h_v and h_q == h_g):
        raise ValueError("sdpa backward: batch or head counts differ among the tensors")
    _check_heads(h_q, h_kv)
    if not (d_q == d_k and d_v == d_g and s_k == s_v and s_q == s_g):
        raise ValueError("sdpa backward: incompatible grad_out/query/key/value shapes")
    bh = b * h_q
    return (bmm_flops((bh, s_q, d_q), (bh, d_q, s_k))
            + bmm_flops((bh, s_q, d_v), (bh, d_v, s_k))
            + bmm_flops((bh, s_k, s_q), (bh, s_q, d_v))
            + bmm_flops((bh, s_q, s_k), (bh, s_k, d_q))
            + bmm_flops((bh, d_q, s_q), (bh, s_q, s_k)))


def _check_heads(h_q: int, h_kv: int) -> None:
    if h_q < h_kv or h_q % h_kv != 0:
        raise ValueError(f"sdpa: query heads ({h_q}) are not a multiple of key/value heads ({h_kv})")


_SDPA = ("aten._scaled_dot_product_efficient_attention", "aten._scaled_dot_product_flash_attention",
         "aten._scaled_dot_product_cudnn_attention")

#: Formulas by op name without overload (``aten.mm``), as :data:`HEAVY_OPS` names them.
FORMULAS: dict[str, Callable[..., int]] = {
    "aten.mm": mm_flops,
    "aten.addmm": addmm_flops,
    "aten.bmm": bmm_flops,
    "aten.baddbmm": baddbmm_flops,
    "aten._scaled_mm": scaled_mm_flops,
    **dict.fromkeys(_SDPA, sdpa_flops),
    **dict.fromkeys((f"{op}_backward" for op in _SDPA), sdpa_backward_flops),
}
