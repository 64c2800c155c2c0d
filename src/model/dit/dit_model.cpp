#include "model/dit/dit_model.h"
#include "core/one_time_work.h"
#include "ops/provenance.h"

#include "model/dit/adaln_cache.h"
#include "model/dit/dit_fp8.h"
#include "model/lora/lora_apply.h"
#include "ops/cancel.h"
#include "ops/ops.h"

#include <cmath>
#include <cstring>

namespace h3::model {

namespace {

bool is_cancelled(const DitForwardOptions& o) {
    return o.cancel && o.cancel->load(std::memory_order_relaxed);
}

int64_t lora_rank(const LoraSet* lora) {
    return lora ? lora->max_rank() : 0;
}

// The run-time adapters of one projection: y (= x·Wᵀ) += Σ scale·(x·Aᵀ)·Bᵀ.
Status add_lora(const ops::Context& ctx, const LoraBlockFactors* lora, LoraProjection p, const Tensor& x,
                Tensor& y, const DitScratch& sc) {
    if (!lora || (*lora)[static_cast<size_t>(p)].empty()) return ok_status();
    return lora_apply(ctx, (*lora)[static_cast<size_t>(p)], x, y, sc.lora);
}

} // namespace

int AdalnTables::find(float t) const {
    for (size_t i = 0; i < timesteps.size(); ++i)
        if (f32_bits(timesteps[i]) == f32_bits(t)) return static_cast<int>(i);
    return -1;
}

void rope_tables(const DitConfig& c, const std::vector<double>& positions, std::vector<float>& cos_out,
                 std::vector<float>& sin_out) {
    const int F = c.rope_freq_dim, R = c.rotary_dim();
    const size_t S = positions.size() / 3;
    // inv_freq[k] = 1 / fp32(theta^(2k / 2F)), all in fp32 as the reference computes it.
    std::vector<float> inv(static_cast<size_t>(F));
    for (int k = 0; k < F; ++k) {
        float expo = static_cast<float>(2 * k) / static_cast<float>(2 * F);
        inv[static_cast<size_t>(k)] = 1.0f / std::pow(static_cast<float>(c.rope_theta), expo);
    }
    cos_out.assign(S * static_cast<size_t>(R), 0.0f);
    sin_out.assign(S * static_cast<size_t>(R), 0.0f);
    for (size_t s = 0; s < S; ++s)
        for (int axis = 0; axis < 3; ++axis) {
            float pos = static_cast<float>(positions[s * 3 + static_cast<size_t>(axis)]);
            for (int k = 0; k < F; ++k) {
                float f = pos * inv[static_cast<size_t>(k)];
                float cv = std::cos(f), sv = std::sin(f);
                size_t base = s * static_cast<size_t>(R) + static_cast<size_t>(axis * F + k);
                cos_out[base] = cv;
                sin_out[base] = sv;
                cos_out[base + static_cast<size_t>(3 * F)] = cv; // the 48 frequencies are duplicated
                sin_out[base + static_cast<size_t>(3 * F)] = sv;
            }
        }
}

std::vector<float> timestep_sinusoid(const std::vector<float>& t, int freq_dim) {
    const int half = freq_dim / 2;
    std::vector<float> omega(static_cast<size_t>(half));
    for (int k = 0; k < half; ++k) {
        float e = static_cast<float>(-std::log(10000.0)) * static_cast<float>(k); // fp32 like the reference
        omega[static_cast<size_t>(k)] = std::exp(e / static_cast<float>(half));
    }
    std::vector<float> out(t.size() * static_cast<size_t>(freq_dim));
    for (size_t m = 0; m < t.size(); ++m)
        for (int k = 0; k < half; ++k) {
            float arg = t[m] * omega[static_cast<size_t>(k)];
            out[m * static_cast<size_t>(freq_dim) + static_cast<size_t>(k)] = std::cos(arg);
            out[m * static_cast<size_t>(freq_dim) + static_cast<size_t>(half + k)] = std::sin(arg);
        }
    return out;
}

Result<std::unique_ptr<DitModel>> DitModel::load(const DitCheckpoint& ckpt, const DitLoadOptions& options,
                                                 ops::Context ctx) {
    if (!(options.device == ctx.device))
        return invalid_argument("DitModel::load: weights device " + options.device.to_string() +
                                " differs from the op context's " + ctx.device.to_string());
    const ResidencyOptions& r = options.residency;
    if (r.plain()) {
        H3_ASSIGN_OR_RETURN(DitWeights w, load_dit_weights(ckpt, options));
        if (options.precision == DitPrecision::kFp8)
            H3_TRY(quantize_dit_fp8(ctx, ckpt.config, options.fp8, w));
        return std::make_unique<DitModel>(ckpt.config, std::move(w), options.precision, ctx);
    }
    if (options.precision == DitPrecision::kFp8)
        return invalid_argument(
            "transformer: precision fp8 keeps its e4m3 block weights resident; residency " + r.describe() +
            " needs bf16, fp16 or fp32 (or residency resident, weight dtype bf16)");
    // The six projection matrices of every block become host masters; layerwise also keeps the AdaLN
    // projections on the host (they are read once per request, block by block).
    const bool adaln_on_host = r.mode == Residency::kLayerwise;
    auto on_host = [&](const std::string& name) {
        if (name.rfind("transformer_blocks.", 0) != 0) return false;
        if (adaln_on_host && name.find(".adaln_proj.") != std::string::npos) return true;
        for (const char* m : {".attn.to_q.weight", ".attn.to_k.weight", ".attn.to_v.weight",
                              ".attn.to_out.0.weight", ".ff.net.0.proj.weight", ".ff.net.2.weight"})
            if (name.size() > std::strlen(m) &&
                name.compare(name.size() - std::strlen(m), std::string::npos, m) == 0)
                return true;
        return false;
    };
    H3_ASSIGN_OR_RETURN(DitWeights w, load_dit_weights(ckpt, options, on_host));
    H3_ASSIGN_OR_RETURN(auto source,
                        make_dit_block_source(w, options.precision, r, ctx, checkpoint_identity(ckpt)));
    return std::make_unique<DitModel>(ckpt.config, std::move(w), options.precision, ctx, std::move(source));
}

DitModel::DitModel(DitConfig config, DitWeights weights, DitPrecision precision, ops::Context ctx,
                   std::unique_ptr<LayerWeightSource> blocks)
    : config_(std::move(config)), weights_(std::move(weights)), precision_(precision), ctx_(ctx),
      blocks_(std::move(blocks)) {
    H3_CHECK(!blocks_ || blocks_->layers() == static_cast<int>(weights_.blocks.size()),
             "block source holds " << (blocks_ ? blocks_->layers() : 0) << " layers for "
                                   << weights_.blocks.size() << " blocks");
}

std::string DitModel::residency_describe() const {
    if (!blocks_) return "resident";
    return blocks_->options().describe();
}

Result<Tensor> DitModel::upload(const Tensor& host) const {
    if (ctx_.device.is_cpu()) return host;
    return host.to(ctx_.device, ctx_.stream());
}

Result<Tensor> DitModel::alloc(const Shape& shape, DType dtype) const {
    return Tensor::empty(shape, dtype, ctx_.device);
}

Result<AdalnTables> DitModel::compute_adaln_tables(const std::vector<float>& timesteps,
                                                   const IntermediateHook* hook,
                                                   const DitCheckpoint* stream_from,
                                                   const LoraSet* lora) const {
    const DitConfig& c = config_;
    const int64_t M = static_cast<int64_t>(timesteps.size());
    if (M == 0) return invalid_argument("compute_adaln_tables: no timesteps");
    AdalnTables tables;
    tables.timesteps = timesteps;
    H3_ASSIGN_OR_RETURN(tables.temb, alloc(Shape{M, c.time_embed_dim}, DType::kF32));
    H3_ASSIGN_OR_RETURN(tables.final_layer, alloc(Shape{M, c.final_adaln_out_features()}, act_dtype()));
    H3_ASSIGN_OR_RETURN(Tensor silu_temb, alloc(Shape{M, c.time_embed_dim}, act_dtype()));
    // Every GEMM below runs one timestep at a time: a GEMM's blocking (and so its rounding) may depend on the
    // row count, and a table row must not depend on which other timesteps share the table (lossless).
    H3_ASSIGN_OR_RETURN(Tensor h1, alloc(Shape{1, c.time_embed_hidden_dim}, DType::kF32));
    for (int64_t m = 0; m < M; ++m) {
        Tensor sinus = host_tensor_from(timestep_sinusoid({timesteps[static_cast<size_t>(m)]}, c.freq_dim),
                                        Shape{1, c.freq_dim});
        H3_ASSIGN_OR_RETURN(sinus, upload(sinus));
        Tensor temb = tables.temb.slice(0, m, m + 1);
        H3_TRY(ops::gemm(ctx_, {}, sinus, weights_.time_w1, weights_.time_b1, h1)); // time MLP in fp32
        H3_TRY(ops::silu(ctx_, h1, h1));
        H3_TRY(ops::gemm(ctx_, {}, h1, weights_.time_w2, weights_.time_b2, temb));
    }
    // SiLU(temb) in fp32, rounded once to the activation dtype, feeds every AdaLN GEMM.
    H3_TRY(ops::silu(ctx_, tables.temb, silu_temb));
    Tensor lora_tmp; // x·Aᵀ of one table row for the AdaLN adapters
    if (lora_rank(lora) > 0) {
        H3_ASSIGN_OR_RETURN(lora_tmp, alloc(Shape{lora_rank(lora)}, act_dtype()));
    }
    auto rows_gemm = [&](const Tensor& w, const Tensor& b, const LoraFactors* adapters,
                         Tensor& out) -> Status {
        for (int64_t m = 0; m < M; ++m) {
            Tensor row = out.slice(0, m, m + 1);
            const Tensor x = silu_temb.slice(0, m, m + 1);
            H3_TRY(ops::gemm(ctx_, {}, x, w, b, row));
            if (adapters && !adapters->empty()) H3_TRY(lora_apply(ctx_, *adapters, x, row, lora_tmp));
        }
        return ok_status();
    };
    DitLoadOptions stream_opts{.device = ctx_.device, .precision = precision_};
    for (int b = 0; b < c.num_layers; ++b) {
        const DitBlockWeights& w = weights_.blocks[static_cast<size_t>(b)];
        Tensor weight = w.adaln_weight, bias = w.adaln_bias;
        if (!weight.defined()) {
            if (!stream_from)
                return invalid_argument(
                    "AdaLN weights were not loaded: stream them from the checkpoint or supply "
                    "precomputed AdaLN tables");
            const std::string p = "transformer_blocks." + std::to_string(b) + ".adaln_proj.linear.";
            H3_ASSIGN_OR_RETURN(weight, load_dit_tensor(*stream_from, p + "weight", stream_opts));
            H3_ASSIGN_OR_RETURN(bias, load_dit_tensor(*stream_from, p + "bias", stream_opts));
        } else if (!(weight.device() == ctx_.device)) { // a host master (layerwise): this block only
            H3_ASSIGN_OR_RETURN(weight, upload(weight));
            H3_ASSIGN_OR_RETURN(bias, upload(bias));
        }
        H3_ASSIGN_OR_RETURN(Tensor mod, alloc(Shape{M, c.adaln_out_features()}, act_dtype()));
        const LoraBlockFactors* block_lora = lora ? lora->block(b) : nullptr;
        H3_TRY(rows_gemm(weight, bias,
                         block_lora ? &(*block_lora)[static_cast<size_t>(LoraProjection::kAdaln)] : nullptr,
                         mod));
        tables.blocks.push_back(mod.view({M * 3, 6LL * c.hidden_size}));
    } // a streamed block's weight is released here, before the next one is read
    H3_TRY(rows_gemm(weights_.norm_out_w, weights_.norm_out_b, lora ? &lora->final_adaln() : nullptr,
                     tables.final_layer));
    if (hook && hook->active("temb")) hook->record("temb", tables.temb);
    return tables;
}

namespace {

// Table rows per packed row: adaln[r] = timestep_index·3 + tag, final[r] = timestep_index (indices into the
// tables' timesteps).
Status row_table_values(const DitPackedInputs& in, const AdalnTables& tables, int32_t* adaln, int32_t* fin) {
    std::vector<int32_t> remap(in.timesteps.size());
    for (size_t m = 0; m < in.timesteps.size(); ++m) {
        int idx = tables.find(in.timesteps[m]);
        if (idx < 0)
            return invalid_argument("AdaLN tables hold no entry for timestep " +
                                    std::to_string(in.timesteps[m]));
        remap[m] = idx;
    }
    for (int64_t r = 0; r < in.rows; ++r) {
        int32_t ti = remap[static_cast<size_t>(in.timestep_indices[static_cast<size_t>(r)])];
        adaln[r] = ti * 3 + in.token_tags[static_cast<size_t>(r)];
        fin[r] = ti;
    }
    return ok_status();
}

} // namespace

Result<DitModel::RowTables> DitModel::build_row_tables(const DitPackedInputs& in, const AdalnTables& tables,
                                                       const DitRequestState* state) const {
    const int64_t S = in.rows;
    RowTables rt;
    if (state) { // RoPE tables and the VSA tile map are per request: reuse them
        rt.cos = state->cos;
        rt.sin = state->sin;
        rt.vsa = state->vsa.get();
    } else {
        std::vector<float> cos, sin;
        rope_tables(config_, in.positions, cos, sin);
        const int64_t R = config_.rotary_dim();
        H3_ASSIGN_OR_RETURN(rt.cos, upload(host_tensor_from(cos, Shape{S, R})));
        H3_ASSIGN_OR_RETURN(rt.sin, upload(host_tensor_from(sin, Shape{S, R})));
    }
    Tensor row = Tensor::host(Shape{S}, DType::kI32), fin = Tensor::host(Shape{S}, DType::kI32);
    H3_TRY(row_table_values(in, tables, row.data_as<int32_t>(), fin.data_as<int32_t>()));
    H3_ASSIGN_OR_RETURN(rt.adaln_row, upload(row));
    H3_ASSIGN_OR_RETURN(rt.final_row, upload(fin));
    return rt;
}

Status DitModel::fill_row_tables(const DitPackedInputs& in, const AdalnTables& tables,
                                 DitWorkspace& ws) const {
    const int64_t S = in.rows;
    if (ws.sharded) { // [adaln rows | final rows] of the padded sequence; adaln_row views the rank's shard
        const SpShard& sh = ws.scratch.par.shard;
        if (sh.rows != S || ws.final_row.numel() != S)
            return invalid_argument("fill_row_tables: the workspace holds " + std::to_string(sh.rows) +
                                    " rows, the inputs " + std::to_string(S));
        ws.row_values.assign(static_cast<size_t>(2 * sh.padded), 0);
        H3_TRY(row_table_values(in, tables, ws.row_values.data(), ws.row_values.data() + sh.padded));
        return ws.rows_up.upload(ws.row_values.data(), ws.row_values.size() * sizeof(int32_t),
                                 ws.adaln_row.data_as<int32_t>() - sh.begin, ctx_.device, ctx_.stream());
    }
    if (ws.adaln_row.numel() != S || ws.final_row.numel() != S)
        return invalid_argument("fill_row_tables: the workspace holds " +
                                std::to_string(ws.adaln_row.numel()) + " rows, the inputs " +
                                std::to_string(S));
    ws.row_values.resize(static_cast<size_t>(2 * S));
    H3_TRY(row_table_values(in, tables, ws.row_values.data(), ws.row_values.data() + S));
    // adaln_row and final_row are the two halves of one buffer: one upload.
    return ws.rows_up.upload(ws.row_values.data(), ws.row_values.size() * sizeof(int32_t),
                             ws.adaln_row.data(), ctx_.device, ctx_.stream());
}

Tensor DitScratch::borrow(int64_t n, int64_t cols, DType dtype) const {
    if (!arena || n <= 0 || cols <= 0) return Tensor();
    const size_t bytes = static_cast<size_t>(n * cols) * dtype_size(dtype);
    if (borrow_offset + bytes > arena->bytes()) return Tensor();
    return Tensor::from_storage(arena, borrow_offset, Shape{n, cols}, dtype);
}

ops::Fp8Activation DitScratch::fp8_rows(const Tensor& buf, int64_t n, int64_t cols) const {
    if (!buf.defined() || n <= 0 || cols <= 0) return {};
    const size_t data_bytes = (static_cast<size_t>(n * cols) + 255) / 256 * 256;
    const size_t room = static_cast<size_t>(buf.numel()) * dtype_size(buf.dtype());
    if (data_bytes + static_cast<size_t>(n) * 4 > room) return {};
    return {Tensor::from_storage(buf.storage(), buf.byte_offset(), Shape{n, cols}, DType::kF8E4M3),
            Tensor::from_storage(buf.storage(), buf.byte_offset() + data_bytes, Shape{n}, DType::kF32)};
}

Result<DitScratch> DitModel::make_scratch(int64_t rows, size_t ffn_chunk_bytes, int64_t lora_rank) const {
    const DitConfig& c = config_;
    const DType act = act_dtype();
    const int64_t D = c.hidden_size, I = c.inner_dim(), F = c.ffn_dim;
    DitScratch s;
    s.rows = rows;
    const size_t per_row = static_cast<size_t>(3 * F) * dtype_size(act);
    s.ffn_rows = std::min(rows, std::max<int64_t>(1, static_cast<int64_t>(ffn_chunk_bytes / per_row)));
    s.ffn_rows = std::max<int64_t>(s.ffn_rows, 1);
    // One allocation, every buffer 256-byte aligned inside it (the run-time adapters' x·Aᵀ last, when any).
    const int n_buf = lora_rank > 0 ? 9 : 8;
    const Shape shapes[] = {{rows, D},           {rows, D},       {rows, I},
                            {rows, I},           {rows, I},       {rows, I},
                            {s.ffn_rows, 2 * F}, {s.ffn_rows, F}, {rows * std::max<int64_t>(lora_rank, 1)}};
    size_t offsets[9], total = 0;
    for (int i = 0; i < n_buf; ++i) {
        offsets[i] = total;
        total += (static_cast<size_t>(shapes[i].numel()) * dtype_size(act) + 255) / 256 * 256;
    }
    H3_ASSIGN_OR_RETURN(s.arena, allocate(total, ctx_.device));
    Tensor* views[] = {&s.x, &s.y, &s.q, &s.k, &s.v, &s.o, &s.ffn_h, &s.ffn_g, &s.lora};
    for (int i = 0; i < n_buf; ++i) *views[i] = Tensor::from_storage(s.arena, offsets[i], shapes[i], act);
    s.borrow_offset = offsets[2];
    return s;
}

Status DitModel::prepare_workspace(const DitPackedInputs& in, size_t ffn_chunk_bytes, DitWorkspace& ws,
                                   int64_t lora_rank, const DitParallel* parallel) const {
    const DitConfig& c = config_;
    const int64_t S = in.rows, Nv = in.video.dim(0), Na = in.audio.dim(0), D = c.hidden_size;
    const bool group = parallel && parallel->active();
    const int seq = group ? parallel->seq_size() : 1, tp = group ? parallel->tp_size() : 1;
    const int ring = group ? parallel->ring_size() : 1;
    const bool sharded = group && parallel->seq;
    if (ws.h.defined() && ws.rows == S && ws.video_rows == Nv && ws.audio_rows == Na &&
        ws.ffn_chunk_bytes == ffn_chunk_bytes && ws.lora_rank == lora_rank && ws.seq == seq && ws.tp == tp &&
        ws.ring == ring && ws.sharded == sharded) {
        ws.scratch.par.group = group ? parallel : nullptr;
        return ok_status();
    }
    AllocationTally tally; // the workspace's buffers are this forward's one-time work
    ws.h = ws.adaln_row = ws.final_row = ws.video_in = ws.audio_in = ws.video_out = ws.audio_out = ws.spare =
        ws.h_full = ws.h_gather = ws.y_full = Tensor();
    ws.scratch = DitScratch{};
    ws.graphs = DitBlockGraphs{}; // recorded over the buffers just released
    ws.rows = S, ws.video_rows = Nv, ws.audio_rows = Na, ws.ffn_chunk_bytes = ffn_chunk_bytes;
    ws.lora_rank = lora_rank;
    ws.seq = seq, ws.tp = tp, ws.ring = ring, ws.sharded = sharded;
    const SpShard sh = sp_shard(S, seq, group ? parallel->seq_rank() : 0);
    H3_ASSIGN_OR_RETURN(ws.h, alloc(Shape{sh.local, D}, residual_dtype()));
    H3_ASSIGN_OR_RETURN(ws.scratch, make_scratch(sh.local, ffn_chunk_bytes, lora_rank));
    H3_ASSIGN_OR_RETURN(Tensor row_tables,
                        alloc(Shape{2 * sh.padded}, DType::kI32)); // one upload per forward
    ws.adaln_row = row_tables.slice(0, sh.begin, sh.begin + sh.local);
    ws.final_row = row_tables.slice(0, sh.padded, sh.padded + S);
    if (group) H3_TRY(prepare_parallel_buffers(*parallel, sh, ws));
    H3_ASSIGN_OR_RETURN(ws.video_in, alloc(Shape{Nv, c.video_patch_dim()}, DType::kF32));
    H3_ASSIGN_OR_RETURN(ws.audio_in, alloc(Shape{Na, c.audio_in_channels}, DType::kF32));
    H3_ASSIGN_OR_RETURN(ws.video_out, alloc(Shape{Nv, c.video_patch_dim()}, DType::kF32));
    H3_ASSIGN_OR_RETURN(ws.audio_out, alloc(Shape{Na, c.audio_in_channels}, DType::kF32));
    const int64_t widest = std::max(Nv, Na);
    if (widest > 0 && !ws.scratch.borrow(widest, D, DType::kF32).defined()) {
        H3_ASSIGN_OR_RETURN(ws.spare, alloc(Shape{widest, D}, DType::kF32));
    }
    tally.note_as_workspace();
    return ok_status();
}

Status DitModel::attention_branch(const DitBlockWeights& w, const Tensor& x, const RowTables* rows,
                                  Tensor& out, DitScratch& sc, const LoraBlockFactors* lora,
                                  PhaseTimer* timer, const VsaLayer* vsa,
                                  const ops::Fp8Activation* x8) const {
    const DitConfig& c = config_;
    const int64_t S = x8 ? x8->data.dim(0) : x.dim(0), hd = c.attention_head_dim;
    const DType act = act_dtype();
    H3_CHECK(S <= sc.rows, "scratch holds " << sc.rows << " rows, the branch needs " << S);
    // The blocks of a device group's rank (the refiner runs replicated: rows == nullptr).
    const DitParallel* group = rows ? sc.par.group : nullptr;
    // All heads, or a tensor-parallel rank's share (w.to_q may be undefined: fp8 keeps only e4m3 copies).
    const int64_t H = c.num_attention_heads / (group ? group->tp_size() : 1);
    auto rows_of = [&](const Tensor& buf) { // [S, H·hd] over the start of a scratch buffer
        return Tensor::from_storage(buf.storage(), buf.byte_offset(), Shape{S, H * hd}, buf.dtype());
    };
    Tensor q = rows_of(sc.q), k = rows_of(sc.k), v = rows_of(sc.v), o = rows_of(sc.o);
    H3_TRY(linear_in(x, x8, w.to_q, w.fp8.to_q, w.fp8.gemm, q));
    H3_TRY(linear_in(x, x8, w.to_k, w.fp8.to_k, w.fp8.gemm, k));
    H3_TRY(linear_in(x, x8, w.to_v, w.fp8.to_v, w.fp8.gemm, v));
    H3_TRY(add_lora(ctx_, lora, LoraProjection::kToQ, x, q, sc));
    H3_TRY(add_lora(ctx_, lora, LoraProjection::kToK, x, k, sc));
    H3_TRY(add_lora(ctx_, lora, LoraProjection::kToV, x, v, sc));
    if (timer) H3_TRY(timer->mark("gemm_qkv"));
    Tensor q3 = q.view({S, H, hd}), k3 = k.view({S, H, hd}), v3 = v.view({S, H, hd}), o3 = o.view({S, H, hd});
    ops::RmsNormParams np{.eps = static_cast<float>(c.qk_norm_eps)};
    ops::RopeParams rp{.rotary_dim = rows ? c.rotary_dim() : 0, .round_tables = act != DType::kF32};
    Tensor none;
    H3_TRY(ops::head_norm_rope(ctx_, np, rp, q3, w.norm_q, rows ? rows->cos : none, rows ? rows->sin : none));
    H3_TRY(ops::head_norm_rope(ctx_, np, rp, k3, w.norm_k, rows ? rows->cos : none, rows ? rows->sin : none));
    if (timer) H3_TRY(timer->mark("head_norm_rope"));
    const bool fp8_attention = precision_ == DitPrecision::kFp8 && w.fp8.attention;
    const bool row_split = group && group->tp_size() > 1;
    // fp8, VSA's separate gate add: it writes to_out's e4m3 rows itself (one pass over o instead of the gate
    // add's and to_out's quantization), into x's scratch, which the gate GEMM has read by then.
    ops::Fp8Activation o8;
    if (vsa && !vsa->fused_gate_add && w.has_gate() && precision_ == DitPrecision::kFp8 &&
        w.fp8.fused_inputs && w.fp8.to_out.defined() && !lora && !row_split && act == DType::kBF16)
        o8 = sc.fp8_rows(sc.x, S, H * hd);
    if (vsa) {
        VsaLayer layer = *vsa;
        layer.fp8 = fp8_attention;
        layer.timer = timer;
        layer.gated_out8 = o8.defined() ? &o8 : nullptr;
        H3_TRY(vsa_attention(w, x, x8, q3, k3, v3, o3, layer, sc));
    } else if (group && group->seq)
        H3_TRY(sequence_attention(q3, k3, v3, o3, sc, fp8_attention));
    else
        H3_TRY(ops::attention(ctx_, {.fp8 = fp8_attention}, q3, k3, v3, o3));
    if (timer) H3_TRY(timer->mark("attention"));
    if (row_split) { // row split: fp32 partial, full fp32 all-reduce, one rounding
        Tensor partial = sc.par.partial.slice(0, 0, S);
        H3_TRY(linear(o, w.to_out, w.fp8.to_out, w.fp8.gemm, partial));
        H3_TRY(add_lora(ctx_, lora, LoraProjection::kToOut, o, partial, sc)); // the rank's share, in fp32
        H3_TRY(reduce_partial(out, sc));
        if (timer) H3_TRY(timer->mark("gemm_out"));
        return ok_status();
    }
    if (o8.defined())
        H3_TRY(ops::gemm_fp8(ctx_, w.fp8.gemm, o8, w.fp8.to_out, Tensor(), out));
    else
        H3_TRY(linear(o, w.to_out, w.fp8.to_out, w.fp8.gemm, out));
    H3_TRY(add_lora(ctx_, lora, LoraProjection::kToOut, o, out, sc));
    if (timer) H3_TRY(timer->mark("gemm_out"));
    return ok_status();
}

Status DitModel::linear(const Tensor& x, const Tensor& w, const ops::Fp8Weight& w8,
                        const ops::Fp8GemmParams& p8, Tensor& y) const {
    if (precision_ == DitPrecision::kFp8 && w8.defined()) return ops::gemm_fp8(ctx_, p8, x, w8, Tensor(), y);
    return ops::gemm(ctx_, {}, x, w, Tensor(), y);
}

Status DitModel::linear_in(const Tensor& x, const ops::Fp8Activation* x8, const Tensor& w,
                           const ops::Fp8Weight& w8, const ops::Fp8GemmParams& p8, Tensor& y) const {
    if (x8) return ops::gemm_fp8(ctx_, p8, *x8, w8, Tensor(), y);
    return linear(x, w, w8, p8, y);
}

Status DitModel::ffn_branch(const DitBlockWeights& w, const Tensor& x, Tensor& out, DitScratch& sc,
                            const LoraBlockFactors* lora, PhaseTimer* timer,
                            const ops::Fp8Activation* x8) const {
    // A tensor-parallel rank's block FFN (1/tp of the 2·ffn columns) writes fp32 partials, summed over the
    // ranks after the chunks. (The refiner's scratch has no group.)
    const int tp = sc.par.group ? sc.par.group->tp_size() : 1;
    const bool row_split = tp > 1;
    const int64_t S = x8 ? x8->data.dim(0) : x.dim(0), chunk = sc.ffn_rows, F2 = sc.ffn_h.dim(1) / tp;
    // SwiGLU writes fc2's e4m3 rows (into ffn_g's storage) where nothing needs them in bf16.
    const bool lora_out = lora && !(*lora)[static_cast<size_t>(LoraProjection::kFfOut)].empty();
    const bool fused_g = precision_ == DitPrecision::kFp8 && w.fp8.fused_inputs && w.fp8.ff_out.defined() &&
                         !lora_out && sc.fp8_rows(sc.ffn_g, chunk, F2 / 2).defined();
    for (int64_t r0 = 0; r0 < S; r0 += chunk) {
        int64_t n = std::min(chunk, S - r0);
        Tensor hs =
            Tensor::from_storage(sc.ffn_h.storage(), sc.ffn_h.byte_offset(), Shape{n, F2}, sc.ffn_h.dtype());
        Tensor gs = Tensor::from_storage(sc.ffn_g.storage(), sc.ffn_g.byte_offset(), Shape{n, F2 / 2},
                                         sc.ffn_g.dtype());
        Tensor os = row_split ? sc.par.partial.slice(0, r0, r0 + n) : out.slice(0, r0, r0 + n);
        const Tensor xs = x8 ? Tensor() : x.slice(0, r0, r0 + n);
        const ops::Fp8Activation x8s = x8 ? x8->rows(r0, r0 + n) : ops::Fp8Activation{};
        H3_TRY(linear_in(xs, x8 ? &x8s : nullptr, w.ff_in, w.fp8.ff_in, w.fp8.gemm, hs));
        H3_TRY(add_lora(ctx_, lora, LoraProjection::kFfIn, xs, hs, sc));
        if (timer) H3_TRY(timer->mark("gemm_fc1"));
        ops::Fp8Activation g8 = fused_g ? sc.fp8_rows(sc.ffn_g, n, F2 / 2) : ops::Fp8Activation{};
        if (fused_g)
            H3_TRY(ops::swiglu_fp8(ctx_, hs, g8));
        else
            H3_TRY(ops::swiglu(ctx_, hs, gs));
        if (timer) H3_TRY(timer->mark("swiglu"));
        H3_TRY(linear_in(gs, fused_g ? &g8 : nullptr, w.ff_out, w.fp8.ff_out, w.fp8.gemm, os));
        H3_TRY(add_lora(ctx_, lora, LoraProjection::kFfOut, gs, os, sc));
        if (timer) H3_TRY(timer->mark("gemm_fc2"));
    }
    if (row_split) H3_TRY(reduce_partial(out, sc));
    return ok_status();
}

Result<Tensor> DitModel::refine_text(const DitPackedInputs& in, const DitForwardOptions& o) const {
    const DitConfig& c = config_;
    const int64_t L = in.text.dim(0), D = c.hidden_size;
    const DType act = act_dtype();
    H3_ASSIGN_OR_RETURN(DitScratch sc, make_scratch(L, o.ffn_chunk_bytes, lora_rank(o.lora)));
    H3_ASSIGN_OR_RETURN(Tensor text_host, in.text.to_dtype(act)); // the conditioner output is bf16
    H3_ASSIGN_OR_RETURN(Tensor text, upload(text_host));
    H3_ASSIGN_OR_RETURN(Tensor x, alloc(Shape{L, D}, residual_dtype())); // the refiner's residual stream
    H3_TRY(ops::gemm(ctx_, {}, text, weights_.context_w, weights_.context_b, x));
    Tensor n = sc.x, y = sc.y;
    ops::RmsNormParams np{.eps = static_cast<float>(c.norm_eps)};
    for (size_t i = 0; i < weights_.refiner.size(); ++i) {
        const DitBlockWeights& w = weights_.refiner[i];
        const LoraBlockFactors* lora = o.lora ? o.lora->refiner(static_cast<int>(i)) : nullptr;
        if (is_cancelled(o)) return cancelled("DiT forward cancelled in the token refiner");
        H3_TRY(ops::rms_norm(ctx_, np, x, w.norm1, n));
        H3_TRY(attention_branch(w, n, nullptr, y, sc, lora));
        H3_TRY(ops::add(ctx_, x, y, x));
        H3_TRY(ops::rms_norm(ctx_, np, x, w.norm2, n));
        H3_TRY(ffn_branch(w, n, y, sc, lora));
        H3_TRY(ops::add(ctx_, x, y, x));
    }
    H3_ASSIGN_OR_RETURN(Tensor out, alloc(Shape{L, D}, act));
    H3_TRY(ops::rms_norm(ctx_, np, x, weights_.refiner_final_norm, out));
    if (o.hook.active("refiner_out")) o.hook.record("refiner_out", out);
    return out;
}

Status DitModel::run_block(int index, Tensor& h, const Tensor& table, const RowTables& rows,
                           const DitForwardOptions& o, DitScratch& sc) const {
    H3_CHECK(index >= 0 && index < static_cast<int>(weights_.blocks.size()),
             "block " << index << " of " << weights_.blocks.size());
    const bool tp = sc.par.group && sc.par.group->tp_size() > 1;
    if (!tp && !blocks_)
        return run_block_with(weights_.blocks[static_cast<size_t>(index)], index, h, table, rows, o, sc);
    LayerWeightSource* source = blocks_.get();
    DitBlockWeights w = weights_.blocks[static_cast<size_t>(index)]; // the norms (and the whole weights)
    if (tp) {                                                        // this rank's slices of the six matrices
        const DitTpShard& shard = *sc.par.group->tp_shard;
        if (!shard.fp8.empty()) {
            const auto& f = shard.fp8[static_cast<size_t>(index)];
            w.fp8.to_q = f[0], w.fp8.to_k = f[1], w.fp8.to_v = f[2];
            w.fp8.to_out = f[3], w.fp8.ff_in = f[4], w.fp8.ff_out = f[5];
        } else {
            w.fp8 = {};
        }
        source = shard.source.get();
        if (!source) {
            const auto& m = shard.blocks[static_cast<size_t>(index)];
            w.to_q = m[0], w.to_k = m[1], w.to_v = m[2], w.to_out = m[3], w.ff_in = m[4], w.ff_out = m[5];
            return run_block_with(w, index, h, table, rows, o, sc);
        }
    }
    H3_ASSIGN_OR_RETURN(const std::vector<Tensor>* m, source->acquire(index));
    w.to_q = (*m)[0];
    w.to_k = (*m)[1];
    w.to_v = (*m)[2];
    w.to_out = (*m)[3];
    w.ff_in = (*m)[4];
    w.ff_out = (*m)[5];
    const Status st = run_block_with(w, index, h, table, rows, o, sc);
    const Status released = source->release(index); // on failure too: no slot stays acquired
    return st.ok() ? released : st;
}

Status DitModel::end_block_pass() const {
    return blocks_ ? blocks_->end_pass() : ok_status();
}

Status DitModel::check_finite(const Tensor& x, Tensor& flags, int slot) const {
    Tensor f = flags.slice(0, slot, slot + 1);
    return ops::mark_nonfinite(ctx_, x, f);
}

Status DitModel::run_block_with(const DitBlockWeights& w, int index, Tensor& h, const Tensor& table,
                                const RowTables& rows, const DitForwardOptions& o, DitScratch& sc) const {
    const DitConfig& c = config_;
    const int64_t S = h.dim(0), D = c.hidden_size;
    const bool emulate = act_dtype() != DType::kF32;
    H3_CHECK(S <= sc.rows, "scratch holds " << sc.rows << " rows, block needs " << S);
    // A tensor-parallel rank applies its slices of the adapters (DitParallel::tp_lora).
    const LoraSet* adapters =
        o.lora && sc.par.group && sc.par.group->tp_size() > 1 ? sc.par.group->tp_lora.get() : o.lora;
    const LoraBlockFactors* lora = adapters ? adapters->block(index) : nullptr;
    if (lora && sc.lora.numel() < S * adapters->max_rank())
        return invalid_argument(
            "DiT block " + std::to_string(index) +
            ": the scratch has no room for the run-time adapters (make_scratch's lora_rank)");
    auto chunk = [&](int i) { return table.slice(1, i * D, (i + 1) * D); };
    const std::string prefix = "blocks." + std::to_string(index) + ".";
    ops::RmsNormParams np{.eps = static_cast<float>(c.norm_eps)};
    ops::ModulateParams mp{.round_intermediate = emulate};
    ops::GatedResidualParams gp{.round_intermediate = emulate};
    Tensor x = sc.x.slice(0, 0, S), y = sc.y.slice(0, 0, S);
    VsaLayer vsa;
    if (o.attention.is_vsa()) {
        if (!rows.vsa)
            return invalid_argument("DiT block " + std::to_string(index) +
                                    ": VSA attention needs the request's tile map (prepare_request with the "
                                    "same attention options)");
        vsa = {.tiles = rows.vsa,
               .sparsity = o.attention.layer_sparsity(index, o.step),
               .compete = o.attention.vsa.mode == VsaMode::kCompete,
               .fused_gate_add = o.attention.vsa.gate_add == VsaGateAdd::kFused};
    }
    PhaseTimer* timer = o.timer;
    auto mark = [&](const char* phase) { return timer ? timer->mark(phase) : ok_status(); };
    // fp8 with fused quantization: the norms write the e4m3 rows their GEMMs take (into x's storage) where no
    // adapter or hook needs the bf16 rows and every GEMM reading them is e4m3 (VSA's compression gate among
    // them: e4m3 unless an fp8 exception keeps it in bf16).
    // Where another setting needs the bf16 rows, the quantization the fp8 setting asks fused runs unfused:
    // one warning per job (ops/provenance.h). A hook is a diagnostic, not a setting: no warning.
    const bool bf16_gate = o.attention.is_vsa() && w.has_gate() && !w.fp8.gate_compress.defined();
    if (precision_ == DitPrecision::kFp8 && w.fp8.fused_inputs) {
        if (lora)
            ops::note_fallback(ops::OpFamily::kFp8Quantization, "fused", "unfused",
                               "run-time LoRA adapters read the blocks' bf16 rows");
        if (bf16_gate)
            ops::note_fallback(ops::OpFamily::kFp8Quantization, "fused", "unfused",
                               "VSA's compression gate (attn.to_gate_compress) is kept in bf16 and reads the "
                               "bf16 rows");
    }
    const bool fusable = precision_ == DitPrecision::kFp8 && w.fp8.fused_inputs && !lora && !bf16_gate &&
                         !o.hook.active(prefix + "norm1_out");
    ops::Fp8Activation x8 = fusable && w.fp8.to_q.defined() && w.fp8.to_k.defined() && w.fp8.to_v.defined()
                                ? sc.fp8_rows(sc.x, S, D)
                                : ops::Fp8Activation{};
    if (x8.defined())
        H3_TRY(ops::rms_norm_modulate_fp8(ctx_, np, mp, h, w.norm1, chunk(0), chunk(1), rows.adaln_row, x8));
    else
        H3_TRY(ops::rms_norm_modulate(ctx_, np, mp, h, w.norm1, chunk(0), chunk(1), rows.adaln_row, x));
    H3_TRY(mark("norm_modulate"));
    if (o.hook.active(prefix + "norm1_out")) o.hook.record(prefix + "norm1_out", x);
    H3_TRY(attention_branch(w, x8.defined() ? Tensor() : x, &rows, y, sc, lora, timer,
                            o.attention.is_vsa() ? &vsa : nullptr, x8.defined() ? &x8 : nullptr));
    if (o.hook.active(prefix + "attn_out")) o.hook.record(prefix + "attn_out", y);
    H3_TRY(ops::gated_residual(ctx_, gp, h, chunk(2), y, rows.adaln_row));
    H3_TRY(mark("gated_residual"));
    x8 = fusable && w.fp8.ff_in.defined() ? sc.fp8_rows(sc.x, S, D) : ops::Fp8Activation{};
    if (x8.defined())
        H3_TRY(ops::rms_norm_modulate_fp8(ctx_, np, mp, h, w.norm2, chunk(3), chunk(4), rows.adaln_row, x8));
    else
        H3_TRY(ops::rms_norm_modulate(ctx_, np, mp, h, w.norm2, chunk(3), chunk(4), rows.adaln_row, x));
    H3_TRY(mark("norm_modulate"));
    H3_TRY(ffn_branch(w, x8.defined() ? Tensor() : x, y, sc, lora, timer, x8.defined() ? &x8 : nullptr));
    if (o.hook.active(prefix + "ff_out")) o.hook.record(prefix + "ff_out", y);
    H3_TRY(ops::gated_residual(ctx_, gp, h, chunk(5), y, rows.adaln_row));
    H3_TRY(mark("gated_residual"));
    if (o.hook.active(prefix + "out")) o.hook.record(prefix + "out", h);
    return ok_status();
}

Status DitModel::modulated_input(int index, const Tensor& h, const Tensor& table, const RowTables& rows,
                                 Tensor& out) const {
    const DitBlockWeights& w = weights_.blocks[static_cast<size_t>(index)];
    const int64_t D = config_.hidden_size;
    ops::RmsNormParams np{.eps = static_cast<float>(config_.norm_eps)};
    ops::ModulateParams mp{.round_intermediate = act_dtype() != DType::kF32};
    return ops::rms_norm_modulate(ctx_, np, mp, h, w.norm1, table.slice(1, 0, D), table.slice(1, D, 2 * D),
                                  rows.adaln_row, out);
}

Result<DitRequestState> DitModel::prepare_request(const DitPackedInputs& in,
                                                  const DitForwardOptions& o) const {
    DitRequestState st;
    st.rows = in.rows;
    const bool group = o.parallel && o.parallel->active(); // a rank's buffers hold its group's lane
    st.workspace = o.keep_workspace && !group ? keeper_.take() : std::make_shared<DitWorkspace>();
    std::vector<float> cos, sin;
    rope_tables(config_, in.positions, cos, sin);
    const int64_t R = config_.rotary_dim();
    if (o.parallel && o.parallel->active()) { // the rank's shard of the padded rows (padding rows zero)
        H3_TRY(check_parallel(*o.parallel, o));
        const SpShard sh = sp_shard(in.rows, o.parallel->seq_size(), o.parallel->seq_rank());
        std::vector<float> c(static_cast<size_t>(sh.local * R), 0.0f), s(c.size(), 0.0f);
        const size_t from = static_cast<size_t>(sh.begin * R), n = static_cast<size_t>(sh.valid * R);
        std::copy(cos.begin() + static_cast<std::ptrdiff_t>(from),
                  cos.begin() + static_cast<std::ptrdiff_t>(from + n), c.begin());
        std::copy(sin.begin() + static_cast<std::ptrdiff_t>(from),
                  sin.begin() + static_cast<std::ptrdiff_t>(from + n), s.begin());
        cos = std::move(c);
        sin = std::move(s);
    }
    const int64_t cos_rows = static_cast<int64_t>(cos.size()) / R;
    H3_ASSIGN_OR_RETURN(st.cos, upload(host_tensor_from(cos, Shape{cos_rows, R})));
    H3_ASSIGN_OR_RETURN(st.sin, upload(host_tensor_from(sin, Shape{cos_rows, R})));
    auto index_tensor = [&](const std::vector<int32_t>& v) -> Result<Tensor> {
        Tensor t = Tensor::host(Shape{static_cast<int64_t>(v.size())}, DType::kI32);
        if (!v.empty()) std::memcpy(t.data(), v.data(), v.size() * sizeof(int32_t));
        return upload(t);
    };
    H3_ASSIGN_OR_RETURN(st.video_index, index_tensor(in.video_indices));
    H3_ASSIGN_OR_RETURN(st.audio_index, index_tensor(in.audio_indices));
    H3_ASSIGN_OR_RETURN(st.text_index, index_tensor(in.text_indices));
    if (o.attention.is_vsa()) {
        H3_ASSIGN_OR_RETURN(st.vsa, prepare_vsa_tiles(in));
        for (int l : o.attention.vsa.dense_layers)
            if (l >= config_.num_layers)
                return invalid_argument("attention vsa: dense_layers holds block " + std::to_string(l) +
                                        " but the DiT has " + std::to_string(config_.num_layers) + " blocks");
    }
    if (in.text.dim(0) > 0) {
        H3_ASSIGN_OR_RETURN(st.text, refine_text(in, o));
    }
    return st;
}

Result<DitOutputs> DitModel::forward(const DitPackedInputs& in, const AdalnTables* tables_in,
                                     const DitForwardOptions& o, const DitRequestState* state) const {
    const ops::CancelScope cancel_scope(o.cancel); // the ops read it between their blocks too
    const DitConfig& c = config_;
    const int64_t S = in.rows, D = c.hidden_size;
    const DType act = act_dtype();
    AdalnTables own;
    if (!tables_in) {
        H3_ASSIGN_OR_RETURN(own, compute_adaln_tables(in.timesteps, &o.hook, nullptr, o.lora));
        tables_in = &own;
    }
    DitRequestState own_state;
    if (!state) {
        H3_ASSIGN_OR_RETURN(own_state, prepare_request(in, o));
        state = &own_state;
    }
    if (state->rows != S)
        return invalid_argument("DiT forward: the request state was prepared for " +
                                std::to_string(state->rows) + " rows, the inputs have " + std::to_string(S));
    // The request's workspace (or one for this forward only), sized for these inputs.
    std::shared_ptr<DitWorkspace> ws = o.reuse_workspace ? state->workspace : nullptr;
    if (!ws) ws = std::make_shared<DitWorkspace>();
    const bool group = o.parallel && o.parallel->active();
    if (group) H3_TRY(check_parallel(*o.parallel, o));
    H3_TRY(prepare_workspace(in, o.ffn_chunk_bytes, *ws, lora_rank(o.lora), o.parallel));
    if (group && state->cos.dim(0) != ws->scratch.par.shard.local)
        return invalid_argument("DiT forward: the request state was prepared for another device group "
                                "(prepare_request with the forward's parallel options)");
    H3_TRY(fill_row_tables(in, *tables_in, *ws));
    const RowTables rows{.cos = state->cos,
                         .sin = state->sin,
                         .adaln_row = ws->adaln_row,
                         .final_row = ws->final_row,
                         .vsa = state->vsa.get()};
    const Tensor& vid_idx = state->video_index;
    const Tensor& aud_idx = state->audio_index;
    const Tensor& txt_idx = state->text_index;
    DitScratch& scratch = ws->scratch;
    Tensor& h = ws->h;
    // sp > 1: the embeddings land in the full-rows buffer, the rank copies its shard out of it.
    const bool sharded = ws->sharded;
    const SpShard shard = scratch.par.shard;
    Tensor& h_in = sharded ? ws->h_full : ws->h;
    const int64_t Nv = in.video.dim(0), Na = in.audio.dim(0);
    // Rows that live outside the blocks (embeddings, head inputs) borrow the scratch arena's block-only part.
    auto outside_rows = [&](int64_t n) {
        Tensor t = scratch.borrow(n, D, DType::kF32);
        return t.defined() ? t : ws->spare.slice(0, 0, n);
    };
    // Host inputs go through page-locked staging; inputs already on the device are read in place.
    auto device_input = [&](const Tensor& x, Tensor& buffer, StagingBuffer& staging) -> Result<Tensor> {
        if (x.device() == ctx_.device && x.dtype() == DType::kF32 && x.is_contiguous()) return x;
        if (!x.device().is_cpu())
            return invalid_argument("DiT forward: input rows " + x.describe() +
                                    " are on another device than " + ctx_.device.to_string());
        Tensor src = x;
        if (x.dtype() != DType::kF32 || !x.is_contiguous()) {
            H3_ASSIGN_OR_RETURN(src, x.to_dtype(DType::kF32));
        }
        H3_TRY(staging.upload(src, buffer, ctx_.stream()));
        return buffer;
    };

    // 1. Embeddings: fp32 patch projections rounded once into the residual stream.
    // fp16: one non-finite flag per block, one for the refined text and one for the stream after the block
    // loop (cached residuals included), read once after the forward.
    const bool check = precision_ == DitPrecision::kFp16;
    Tensor flags;
    if (check) {
        Tensor zeros = Tensor::host(Shape{c.num_layers + 2}, DType::kI32);
        H3_ASSIGN_OR_RETURN(flags, upload(zeros));
        if (state->text.defined()) H3_TRY(check_finite(state->text, flags, c.num_layers));
    }
    if (Nv > 0) {
        H3_ASSIGN_OR_RETURN(Tensor xv, device_input(in.video, ws->video_in, ws->video_up));
        Tensor ev = outside_rows(Nv);
        H3_TRY(ops::gemm(ctx_, {}, xv, weights_.proj_in_w, weights_.proj_in_b, ev));
        H3_TRY(ops::scatter_rows(ctx_, ev, vid_idx, h_in));
    }
    if (Na > 0) {
        H3_ASSIGN_OR_RETURN(Tensor xa, device_input(in.audio, ws->audio_in, ws->audio_up));
        Tensor ea = outside_rows(Na);
        H3_TRY(ops::gemm(ctx_, {}, xa, weights_.audio_proj_in_w, weights_.audio_proj_in_b, ea));
        H3_TRY(ops::scatter_rows(ctx_, ea, aud_idx, h_in));
    }
    if (state->text.defined()) H3_TRY(ops::scatter_rows(ctx_, state->text, txt_idx, h_in));
    if (sharded)
        H3_TRY(h.copy_from(ws->h_full.slice(0, shard.begin, shard.begin + shard.local), ctx_.stream()));

    // 2. Blocks, sharing one set of scratch buffers.
    {
        const BlockScheduleContext sctx{.model = this,
                                        .tables = tables_in,
                                        .rows = &rows,
                                        .scratch = &scratch,
                                        .parallel = group ? o.parallel : nullptr,
                                        .valid_rows = group ? shard.valid : -1};
        if (o.timer) H3_TRY(o.timer->start());
        const char* off = block_graphs_off(o, o.reuse_workspace && ws == state->workspace, group);
        const bool recorded = *off == '\0';
        if (!recorded)
            ops::note_impl(ops::OpFamily::kBlockGraphs,
                           ctx_.is_cuda() ? "host-launch (" + std::string(off) + ")" : "cpu");
        for (int b = 0; b < c.num_layers; ++b) {
            if (o.schedule) {
                H3_ASSIGN_OR_RETURN(int next, o.schedule->at_block(sctx, b, h));
                H3_CHECK(next >= b && next <= c.num_layers,
                         "block schedule jumped from " << b << " to " << next);
                if (next == c.num_layers) break;
                b = next;
            }
            if (is_cancelled(o)) return cancelled("DiT forward cancelled before block " + std::to_string(b));
            const Tensor& table = tables_in->blocks[static_cast<size_t>(b)];
            H3_TRY(recorded ? run_block_recorded(b, h, table, rows, o, *ws)
                            : run_block(b, h, table, rows, o, scratch));
            if (check) H3_TRY(check_finite(h, flags, b));
            if (o.schedule && b + 1 == c.num_layers) {
                H3_ASSIGN_OR_RETURN(int end, o.schedule->at_block(sctx, c.num_layers, h));
                H3_CHECK(end == c.num_layers, "block schedule must end the loop after the last block");
            }
        }
    }

    // Prefetch the next forward's first streamed blocks during the heads (a tensor-parallel rank's own
    // source, where its slices stream).
    if (group && o.parallel->tp_size() > 1 && o.parallel->tp_shard->source)
        H3_TRY(o.parallel->tp_shard->source->end_pass());
    else
        H3_TRY(end_block_pass());
    if (check) H3_TRY(check_finite(h, flags, c.num_layers + 1));

    // 3. Final norm with (shift, scale) per timestep, then the fp32 heads on the rows they serve (sp > 1:
    // over the gathered shards, on every rank).
    Tensor hs = h;
    Tensor y = sharded ? ws->y_full.slice(0, 0, S) : scratch.x.slice(0, 0, S); // the blocks are done with x
    if (sharded) {
        H3_TRY(o.parallel->seq->all_gather(ctx_, h, ws->h_gather));
        hs = ws->h_gather.slice(0, 0, S);
    }
    const Tensor& fin = tables_in->final_layer;
    ops::RmsNormParams np{.eps = static_cast<float>(c.final_norm_eps)};
    ops::ModulateParams mp{.round_intermediate = act != DType::kF32};
    H3_TRY(ops::rms_norm_modulate(ctx_, np, mp, hs, weights_.norm_out, fin.slice(1, 0, D),
                                  fin.slice(1, D, 2 * D), rows.final_row, y));
    if (o.hook.active("final_norm_out")) o.hook.record("final_norm_out", y);
    auto head = [&](const Tensor& idx, int64_t n, const Tensor& w, const Tensor& bias,
                    Tensor& res) -> Status {
        if (n == 0) return ok_status();
        Tensor rows32 = outside_rows(n);
        H3_TRY(ops::gather_rows(ctx_, y, idx, rows32));
        return ops::gemm(ctx_, {}, rows32, w, bias, res);
    };
    H3_TRY(head(vid_idx, Nv, weights_.proj_out_w, weights_.proj_out_b, ws->video_out));
    H3_TRY(head(aud_idx, Na, weights_.audio_proj_out_w, weights_.audio_proj_out_b, ws->audio_out));
    if (check) {
        H3_ASSIGN_OR_RETURN(Tensor f, flags.to(Device::cpu(), ctx_.stream()));
        const int32_t* fv = f.data_as<const int32_t>();
        if (fv[c.num_layers])
            return internal_error("fp16 activation overflow: the token refiner's output holds inf/NaN; this "
                                  "request cannot run in fp16 (use dtype bf16 or fp32)");
        for (int b = 0; b < c.num_layers; ++b)
            if (fv[b])
                return internal_error(
                    "fp16 activation overflow: the residual stream holds inf/NaN after block " +
                    std::to_string(b) +
                    "; this request cannot run in fp16 (use dtype bf16 "
                    "or fp32)");
        if (fv[c.num_layers + 1])
            return internal_error(
                "fp16 activation overflow: the residual stream holds inf/NaN after the blocks "
                "(a cached residual); this request cannot run in fp16 (use dtype bf16 or "
                "fp32)");
    }
    DitOutputs out;
    if (o.outputs_on_device && o.reuse_workspace && ws == state->workspace) {
        out.sample = ws->video_out;
        out.audio_sample = ws->audio_out;
        return out;
    }
    // Host copies (this waits for the stream; a forward-only workspace is released after it).
    H3_ASSIGN_OR_RETURN(out.sample, ws->video_down.download(ws->video_out, ctx_.stream()));
    H3_ASSIGN_OR_RETURN(out.audio_sample, ws->audio_down.download(ws->audio_out, ctx_.stream()));
    if (o.outputs_on_device && !ctx_.device.is_cpu()) { // a forward-only workspace cannot lend its outputs
        H3_ASSIGN_OR_RETURN(out.sample, out.sample.to(ctx_.device, ctx_.stream()));
        H3_ASSIGN_OR_RETURN(out.audio_sample, out.audio_sample.to(ctx_.device, ctx_.stream()));
    }
    return out;
}

} // namespace h3::model
