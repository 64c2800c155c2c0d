// All ops (umbrella header). Each op family has its own header ops/<family>.h: a parameter struct, one
// dispatching entry point (by ctx.device), a CPU reference in ops/cpu/<family>.cpp and a CUDA implementation
// in ops/cuda/<family>.cu. Shapes, dtypes and devices are validated by the dispatcher (ops/<family>.cpp) and
// reported as Status, so that the CPU and CUDA halves see only valid input.
//
// Conventions: activations are row-major [rows, cols] (contiguous unless stated); "table" arguments are 2-D
// views whose rows may be strided (stride(0) >= cols, stride(1) == 1) so that AdaLN chunks can be passed
// without copies; row indices are i32 or i64. All reductions accumulate in fp32 (double on the CPU
// reference where cheap). Outputs may have a different float dtype than inputs: the op rounds once, at the
// store.
#pragma once

#include "ops/adaln.h"
#include "ops/attention.h"
#include "ops/attention_merge.h"
#include "ops/audio_act.h"
#include "ops/conv.h"
#include "ops/conv3d.h"
#include "ops/elementwise.h"
#include "ops/fp8_fused.h"
#include "ops/frames.h"
#include "ops/fused.h"
#include "ops/gemm.h"
#include "ops/gemm_fp8.h"
#include "ops/group_norm.h"
#include "ops/layer_norm.h"
#include "ops/norm.h"
#include "ops/quant.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/rope.h"
#include "ops/rows.h"
#include "ops/sampling.h"
#include "ops/tiles.h"
#include "ops/transpose.h"
#include "ops/vsa.h"
