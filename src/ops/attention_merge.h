// attention_merge: the exact online-softmax combination of two partial attention results (ring attention,
// issue #17). See ops.h for the conventions shared by all ops.
#pragma once

#include "core/tensor.h"
#include "ops/context.h"

namespace h3::ops {

// Two attention results of the same queries over disjoint key sets A and B: o_a, o_b [S, H, D] (f32, bf16 or
// f16 each, contiguous) and their log-sum-exps lse_a, lse_b [S, H] f32 (ln Σ_j exp(scale·q·k_j) over the
// set's keys, as ops::attention returns with AttentionParams::lse). The merge is the attention over A ∪ B:
//   m = max(lse_a, lse_b);  w_a = exp(lse_a − m),  w_b = exp(lse_b − m)
//   o = (w_a·o_a + w_b·o_b) / (w_a + w_b),  lse = m + ln(w_a + w_b)
// A side with lse = −inf holds no key: it contributes nothing and its o is not read (it may hold anything);
// both −inf (every key of the row excluded) gives o = 0 and lse = −inf. Weights and sums in fp32 (double
// on the CPU), o rounded once to o's dtype. `lse` is optional (undefined: not written); o may be o_a (or
// o_b) and lse may be lse_a (or lse_b), in place — every element reads only its own position.
Status attention_merge(const Context& ctx, const Tensor& o_a, const Tensor& lse_a, const Tensor& o_b,
                       const Tensor& lse_b, Tensor& o, Tensor& lse);

} // namespace h3::ops
