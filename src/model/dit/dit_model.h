// The H3 DiT: weights on one device + the exact forward (spec §6), with request-level hoisting:
// the refiner output and RoPE tables are computed once per request (DitRequest), and AdaLN modulation tables
// for every timestep of a schedule once before denoising (AdalnTables), so the AdaLN projection weights
// need not stay on the device.
#pragma once

#include "core/phase_timer.h"
#include "core/staging.h"
#include "core/tensor.h"
#include "model/dit/dit_attention.h"
#include "model/dit/dit_config.h"
#include "model/dit/dit_graphs.h"
#include "model/dit/dit_inputs.h"
#include "model/dit/dit_parallel.h"
#include "model/dit/dit_weights.h"
#include "model/dit/dit_workspace_keeper.h"
#include "model/lora/lora_set.h"
#include "model/weights/layer_source.h"
#include "ops/comm_lane.h"
#include "ops/context.h"
#include "ops/vsa.h"

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace h3::model {

// Receives named intermediates ("refiner_out", "temb", "blocks.3.attn_out", "final_norm_out", ...) when
// `wants(name)` is true. Tensors may live on the device; the hook copies what it keeps.
struct IntermediateHook {
    std::function<bool(const std::string&)> wants;
    std::function<void(const std::string&, const Tensor&)> record;
    bool active(const std::string& name) const { return wants && record && wants(name); }
};

// Per-block AdaLN tables [M·3, 6·hidden] and the final layer's [M, 2·hidden] for a set of timesteps.
struct AdalnTables {
    std::vector<float> timesteps; // M values, in table order
    std::vector<Tensor> blocks;   // one per block, activation dtype, on the model's device
    Tensor final_layer;
    Tensor temb; // [M, time_embed_dim] f32
    // Index of `t` in `timesteps` (exact match), or -1.
    int find(float t) const;
};

class BlockSchedule;

struct DitForwardOptions {
    IntermediateHook hook;
    BlockSchedule* schedule = nullptr; // step caches (src/cache); null: every block runs, nothing probed
    const std::atomic<bool>* cancel = nullptr; // checked between blocks
    size_t ffn_chunk_bytes = 512ull << 20;     // budget for the [rows, 2·ffn] + [rows, ffn] intermediates
    AttentionChoice attention; // the 50 blocks' attention (VSA: over the tile map of prepare_request)
    int step = 0;              // the denoising step (0-based): VSA's dense_first_n_steps reads it
    // The outputs stay on the model's device: DitOutputs then views the request's workspace (valid until the
    // next forward over the same request state; copy what must live longer) and the forward queues its work
    // without waiting for the device. false: host copies (the forward waits for its stream only).
    bool outputs_on_device = false;
    // true: the request state's workspace is reused by every forward (no device allocation per forward);
    // false: a workspace for this forward only (what every forward paid before; benches compare the two).
    bool reuse_workspace = true;
    // prepare_request: the request state takes the workspace the model keeps between requests
    // (DitModel::workspace_keeper; one request at a time, a concurrent one gets its own), so a request of the
    // last one's shape allocates nothing in its first forward. false: a workspace of the request's own,
    // released with it. A device group's ranks always get their own.
    bool keep_workspace = false;
    PhaseTimer* timer = nullptr; // per-op device time of the blocks (bench dit --breakdown); null: none
    // CUDA: replay each block's recorded ops with one launch from the workspace's second forward on
    // (model/dit/dit_graphs.h says when a forward cannot); false: every op is launched from the host.
    bool block_graphs = true;

    const LoraSet* lora = nullptr; // run-time adapters of this request (null: none); see model/lora/
    // This rank's place in a device group (model/dit/dit_parallel.h); null or inactive: one rank. The request
    // state must come from prepare_request with the same parallel options.
    const DitParallel* parallel = nullptr;
};

// Scratch buffers of one forward, reused by every block and the refiner instead of allocated per block.
// One device arena holds them all (`arena`); from `borrow_offset` on (q, k, v, o and the FFN chunks) it is
// free outside the blocks, and the embeddings and output heads use it there.
struct DitScratch {
    Tensor x, y, q, k, v, o; // [rows, hidden] / [rows, inner]
    Tensor ffn_h, ffn_g;     // [ffn_rows, 2·ffn] / [ffn_rows, ffn]: the FFN runs in row chunks of ffn_rows
    Tensor lora;             // [rows · max rank] x·Aᵀ of run-time adapters (undefined without adapters)
    int64_t rows = 0, ffn_rows = 0;
    std::shared_ptr<Storage> arena;
    size_t borrow_offset = 0;
    // A [n, cols] tensor of `dtype` over the borrowable part of the arena, or an undefined tensor when it
    // does not fit.
    Tensor borrow(int64_t n, int64_t cols, DType dtype) const;
    // e4m3 rows [n, cols] and their f32 scales [n] over the storage of `buf` (a bf16 buffer the fused fp8
    // path leaves unwritten: x, ffn_g), or an undefined activation when they do not fit in it.
    ops::Fp8Activation fp8_rows(const Tensor& buf, int64_t n, int64_t cols) const;
    // VSA, allocated on first use: the compression gate [rows, inner], pooled q/k/v [3, H, tiles, D] f32,
    // tile scores [H, tiles, tiles] f32, key-tile lists [H, video tiles, width] i32, compression output [H,
    // tiles, D].
    struct Vsa {
        Tensor gate, pooled, scores, lists, oc;
    } vsa;
    // A rank of a device group (DitForwardOptions::parallel): Ulysses' send buffer and the gathered q, k, v,
    // o [chunk rows · inner/(sp·tp)] (chunk = padded / ring; o's padding rows stay zero), the row
    // permutations that pack the shard's heads by destination rank and unpack them (i32 [local · sp]), and
    // the fp32 [rows, hidden] partial sums of tensor parallel's to_out and fc2. The ring (ring > 1): every
    // chunk's k and v [padded rows · inner/(sp·tp)] (all_gather), the fp32 accumulator o_acc [chunk, heads
    // share, D] (padding rows stay zero) and its lse_acc [chunk, heads share], one key chunk's partial o_part
    // (activation dtype) / lse_part.
    // Ulysses with `groups` head groups (ulysses_overlap_groups): send / send_k / send_v hold the packed
    // q / k / v [groups, sp, local rows, heads/groups·hd] (send is reused for o's way back), q / k / v / o
    // the gathered [groups, chunk, heads/groups·hd]; the collectives of a group run on `lane`.
    struct Parallel {
        const DitParallel* group = nullptr;
        SpShard shard;
        int groups = 1;
        std::shared_ptr<ops::CommLane> lane;
        Tensor send, send_k, send_v, q, k, v, o, pack, unpack, partial;
        Tensor k_all, v_all, o_acc, lse_acc, o_part, lse_part;
    } par;
};

// The device memory every forward of one request reuses while the layout holds (no allocation per forward
// or per step): the residual stream, the blocks' scratch, the per-step row tables, the head outputs, and
// page-locked staging for the per-step uploads and the downloads. The first forward over a request state
// fills it in.
struct DitWorkspace {
    int64_t rows = 0, video_rows = 0, audio_rows = 0;
    size_t ffn_chunk_bytes = 0;
    int64_t lora_rank = 0;       // room for run-time adapters of this rank in the scratch
    Tensor h;                    // [S, hidden] residual stream
    DitScratch scratch;          // S rows
    Tensor adaln_row, final_row; // [S] i32 each, the halves of one [2·S] buffer (see DitModel::RowTables)
    Tensor video_in, audio_in; // [Nv, video_patch_dim] / [Na, audio_in_channels] f32 (host inputs land here)
    Tensor video_out, audio_out; // the same shapes: head outputs
    Tensor spare;                // embeddings / head rows when the scratch arena cannot lend them
    // A rank of a device group with sp·ring > 1: h holds the rank's shard; the embeddings land in h_full
    // [padded, hidden] (padding rows zero), the blocks' shards are gathered into h_gather and the final norm
    // writes y_full (both [padded, hidden]).
    Tensor h_full, h_gather, y_full;
    int seq = 1, tp = 1, ring = 1; // the group the workspace was sized for (seq = sp·ring ranks)
    bool sharded = false;          // the sequence-parallel path (DitParallel::seq set)
    StagingBuffer rows_up, video_up, audio_up, video_down, audio_down;
    std::vector<int32_t> row_values; // host staging of the two row tables [2·S]
    DitBlockGraphs graphs;           // the blocks' recordings (CUDA; model/dit/dit_graphs.h)
};

// What stays fixed for a whole request and is computed once (spec §13: lossless hoisting): the refined
// conditioner rows, the RoPE tables and the row-index lists, all on the model's device.
struct DitRequestState {
    Tensor text;     // [L, hidden] refiner output (after final_norm), activation dtype
    Tensor cos, sin; // [S, rotary_dim] f32 (a rank of a device group: its shard's rows, padding rows zero)
    Tensor video_index, audio_index, text_index; // i32
    int64_t rows = 0;
    std::shared_ptr<const ops::VsaTiles> vsa; // VSA's tile map (when the options ask for VSA)
    // Made empty by prepare_request (or the model's kept one, DitForwardOptions::keep_workspace), filled by
    // the first forward, reused by the next ones (copies of the state share it; forwards over one state must
    // not run concurrently).
    std::shared_ptr<DitWorkspace> workspace;
};

class DitModel {
public:
    static Result<std::unique_ptr<DitModel>> load(const DitCheckpoint& ckpt, const DitLoadOptions& options,
                                                  ops::Context ctx);
    // Builds a model around weights made elsewhere (benches with random weights). With `blocks`, the six
    // projection matrices of every block come from that source (weights.blocks hold the norms only).
    DitModel(DitConfig config, DitWeights weights, DitPrecision precision, ops::Context ctx,
             std::unique_ptr<LayerWeightSource> blocks = nullptr);

    const DitConfig& config() const { return config_; }
    DitPrecision precision() const { return precision_; }
    DType act_dtype() const { return precision_dtype(precision_); }
    // The residual stream's dtype: the activation dtype, except fp32 under kFp16.
    DType residual_dtype() const { return model::residual_dtype(precision_); }
    const ops::Context& context() const { return ctx_; }
    // The block weight source (null: today's resident weights, read directly) and its counters.
    const LayerWeightSource* block_source() const { return blocks_.get(); }
    LayerWeightSource* block_source() { return blocks_.get(); }
    std::string residency_describe() const;

    // Time embedding and AdaLN tables for the given timesteps. With the AdaLN weights loaded they are used;
    // otherwise `stream_from` supplies each block's projection in turn (read from the checkpoint, put on the
    // device for that block only, then released) so the 13 B AdaLN weights never sit on the device at once.
    // `lora`: run-time adapters of the AdaLN projections (block and final layer) added to each table row.
    Result<AdalnTables> compute_adaln_tables(const std::vector<float>& timesteps,
                                             const IntermediateHook* hook = nullptr,
                                             const DitCheckpoint* stream_from = nullptr,
                                             const LoraSet* lora = nullptr) const;
    // Refiner, RoPE tables and index lists for a request (text, positions and indices of `in`).
    Result<DitRequestState> prepare_request(const DitPackedInputs& in,
                                            const DitForwardOptions& options = {}) const;
    // One forward. `tables` must hold every timestep in `in` (computed on the fly when null); `state` must
    // come from prepare_request over the same layout (computed on the fly when null). Per step only the
    // video/audio rows, timesteps and timestep_indices of `in` may change. `in.video` / `in.audio` may live
    // on the model's device (f32, contiguous: the loop keeps its latents there); else they are uploaded.
    Result<DitOutputs> forward(const DitPackedInputs& in, const AdalnTables* tables,
                               const DitForwardOptions& options = {},
                               const DitRequestState* state = nullptr) const;

    // The forward's building blocks, public for the benches.
    struct RowTables {
        Tensor cos, sin;                    // [S, rotary_dim] f32 on the device
        Tensor adaln_row;                   // [S] i32: table row timestep_index·3 + tag
        Tensor final_row;                   // [S] i32: timestep_index
        const ops::VsaTiles* vsa = nullptr; // the request's VSA tile map (VSA forwards)
    };
    Result<RowTables> build_row_tables(const DitPackedInputs& in, const AdalnTables& tables,
                                       const DitRequestState* state = nullptr) const;
    // The row tables of `in` into the workspace's buffers (page-locked staging, no device sync).
    Status fill_row_tables(const DitPackedInputs& in, const AdalnTables& tables, DitWorkspace& ws) const;
    Result<DitScratch> make_scratch(int64_t rows, size_t ffn_chunk_bytes, int64_t lora_rank = 0) const;
    // VSA's tile map of a t2va / fl2va layout (in.segments), on the model's device.
    Result<std::shared_ptr<const ops::VsaTiles>> prepare_vsa_tiles(const DitPackedInputs& in) const;
    // Runs block `index` (its weights acquired from the block source for the block and released after).
    Status run_block(int index, Tensor& h, const Tensor& block_table, const RowTables& rows,
                     const DitForwardOptions& options, DitScratch& scratch) const;
    // The block source's pass ended (a forward's block loop, or a bench's pass over the blocks): unused
    // prefetches are released and the next pass's first blocks prefetched. No-op without a source.
    Status end_block_pass() const;
    // Sizes `ws` for `in` (allocating only when the layout or the FFN chunk budget changed).
    Status prepare_workspace(const DitPackedInputs& in, size_t ffn_chunk_bytes, DitWorkspace& ws,
                             int64_t lora_rank = 0, const DitParallel* parallel = nullptr) const;
    // Tensor parallel: rank `rank` of `size`'s slices of every block's six projection matrices in the model's
    // weight format (model/dit/dit_parallel.h DitTpShard: native copies on the model's device, int8 or
    // layerwise masters behind a weight source of the rank's own, e4m3 slices with their scales).
    Result<std::shared_ptr<DitTpShard>> make_tp_shard(int rank, int size) const;
    // Tensor parallel: rank `rank` of `size`'s slices of run-time adapters (DitParallel::tp_lora): the block
    // factors of column-split layers keep A and take B's rows, those of row-split layers take A's columns
    // and keep B (their terms join the fp32 partials before the all-reduce).
    Result<std::shared_ptr<const LoraSet>> make_tp_lora(const LoraSet& lora, int rank, int size) const;
    // Whether `parallel` can run this model with `options` (degrees, residency, precision, adapters, VSA).
    Status check_parallel(const DitParallel& parallel, const DitForwardOptions& options) const;
    // The first op of block `index`: RMSNorm(h)·(1 + scale_msa) + shift_msa into `out` [S, hidden] (the
    // TeaCache probe).
    Status modulated_input(int index, const Tensor& h, const Tensor& block_table, const RowTables& rows,
                           Tensor& out) const;

    // Folds adapters into the resident weights for the rest of the model's life (model/lora/lora_apply.h
    // lora_merge: fp32 sum, one rounding). Every target's weight must be resident (AdaLN adapters need the
    // AdaLN weights loaded). Afterwards merged_adapters() names them (the AdaLN cache keys on it).
    Status merge_adapters(const std::vector<LoraUse>& uses);
    const std::string& merged_adapters() const { return merged_; }

    // The workspace kept between requests (DitForwardOptions::keep_workspace); release() frees its memory.
    DitWorkspaceKeeper& workspace_keeper() const { return keeper_; }

private:
    Result<Tensor> refine_text(const DitPackedInputs& in, const DitForwardOptions& options) const;
    // One block's VSA: the tile map and this block's sparsity at this step.
    struct VsaLayer {
        const ops::VsaTiles* tiles = nullptr;
        double sparsity = 0.0;
        bool compete = false;
        bool fp8 = false;            // the sparse (and dense) attention in the attention op's fp8 mode
        bool fused_gate_add = false; // VsaOptions::gate_add: the sparse kernel adds the compression branch
        // fp8 with a separate gate add: the gate add writes the out projection's e4m3 rows here
        // (ops::vsa_gate_add_fp8; o3 keeps the attention output) instead of adding into o3. Set only for a
        // gated layer whose gate add is separate.
        ops::Fp8Activation* gated_out8 = nullptr;
        // bench dit's per-op timer: the scores, selection, sparse attention and compression branch as
        // phases of their own (nullptr: no marks)
        PhaseTimer* timer = nullptr;
    };
    // x8 (fused fp8 quantization): the branch input's e4m3 rows, which the q/k/v (fc1) GEMMs and VSA's
    // compression gate take; x is then undefined.
    Status attention_branch(const DitBlockWeights& w, const Tensor& x, const RowTables* rows, Tensor& out,
                            DitScratch& scratch, const LoraBlockFactors* lora, PhaseTimer* timer = nullptr,
                            const VsaLayer* vsa = nullptr, const ops::Fp8Activation* x8 = nullptr) const;
    // softmax attention of q3/k3/v3 into o3 under VSA (model/dit/dit_vsa.cpp); the compression gate's GEMM
    // reads the branch input: its e4m3 rows x8 when given (the gate's e4m3 weight), else x.
    Status vsa_attention(const DitBlockWeights& w, const Tensor& x, const ops::Fp8Activation* x8,
                         const Tensor& q3, const Tensor& k3, const Tensor& v3, Tensor& o3,
                         const VsaLayer& layer, DitScratch& scratch) const;
    Status ffn_branch(const DitBlockWeights& w, const Tensor& x, Tensor& out, DitScratch& scratch,
                      const LoraBlockFactors* lora, PhaseTimer* timer = nullptr,
                      const ops::Fp8Activation* x8 = nullptr) const;
    // Sequence-parallel attention (sp·ring > 1): Ulysses (sp > 1) turns q3/k3/v3 [local, heads, D] into the
    // ring chunk's rows × heads/sp; then attention over the S real rows (ring 1) or ring_attention; Ulysses
    // back into o3.
    Status sequence_attention(const Tensor& q3, const Tensor& k3, const Tensor& v3, Tensor& o3,
                              DitScratch& scratch, bool fp8) const;
    // sequence_attention with the rank's heads in par.groups groups overlapped with the collectives.
    Status grouped_sequence_attention(const Tensor& q3, const Tensor& k3, const Tensor& v3, Tensor& o3,
                                      DitScratch& sc, bool fp8) const;
    // Ring attention (model/dit/dit_ring.cpp): q/k/v [chunk, heads share, D] of this ring rank's chunk; K/V
    // of every chunk gathered over the ring, attention per key chunk with its lse, merged exactly; o [chunk,
    // heads share, D] gets the chunk's outputs (padding query rows zero). fp8: the partials in the attention
    // op's fp8 mode.
    Status ring_attention(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& o, DitScratch& scratch,
                          bool fp8) const;
    // The device group's buffers of a workspace (DitScratch::Parallel, the full-rows buffers).
    Status prepare_parallel_buffers(const DitParallel& parallel, const SpShard& shard,
                                    DitWorkspace& ws) const;
    // Tensor parallel: out ← round(Σ over the tp ranks of scratch.par.partial's fp32 rows): the full fp32
    // all-reduce, then one rounding.
    Status reduce_partial(Tensor& out, DitScratch& scratch) const;
    // y = x·wᵀ: the e4m3 GEMM under kFp8 when the layer has an fp8 copy, else the bf16/fp32 one.
    Status linear(const Tensor& x, const Tensor& w, const ops::Fp8Weight& w8, const ops::Fp8GemmParams& p8,
                  Tensor& y) const;
    // linear() on a branch input: its e4m3 rows x8 when given (the layer's e4m3 weight), else x.
    Status linear_in(const Tensor& x, const ops::Fp8Activation* x8, const Tensor& w, const ops::Fp8Weight& w8,
                     const ops::Fp8GemmParams& p8, Tensor& y) const;
    Status run_block_with(const DitBlockWeights& w, int index, Tensor& h, const Tensor& block_table,
                          const RowTables& rows, const DitForwardOptions& options, DitScratch& scratch) const;
    // Whether this forward's blocks may run as recordings (dit_graphs.h lists what rules them out).
    bool block_graphs_apply(const DitForwardOptions& options, bool own_workspace, bool group) const;
    // Why a forward launches its blocks op by op (the provenance's "host-launch (why)"); "" when they are
    // recorded.
    const char* block_graphs_off(const DitForwardOptions& options, bool own_workspace, bool group) const;
    // run_block through the workspace's recording of block `index` (recorded on its second run).
    Status run_block_recorded(int index, Tensor& h, const Tensor& block_table, const RowTables& rows,
                              const DitForwardOptions& options, DitWorkspace& ws) const;
    Result<Tensor> upload(const Tensor& host) const;
    Result<Tensor> alloc(const Shape& shape, DType dtype) const;
    // fp16: flags[slot] = 1 when `x` holds an inf/NaN (read once at the end of a forward).
    Status check_finite(const Tensor& x, Tensor& flags, int slot) const;

    DitConfig config_;
    DitWeights weights_;
    DitPrecision precision_;
    ops::Context ctx_;
    std::string merged_;                        // adapters folded into weights_ (merge_adapters), "" for none
    std::unique_ptr<LayerWeightSource> blocks_; // mutable streaming state (one forward at a time)
    mutable DitWorkspaceKeeper keeper_;         // the workspace kept between requests
};

// Builds the weight source of `weights.blocks`' six projection matrices for `options` (resident int8, or
// layerwise in either format): moves them out of `weights` into host masters (int8: quantized at load, or
// read from / written to options.int8_cache_dir keyed by `identity`), then places them. Used by
// DitModel::load and by benches that make random weights.
Result<std::unique_ptr<LayerWeightSource>> make_dit_block_source(DitWeights& weights, DitPrecision precision,
                                                                 const ResidencyOptions& options,
                                                                 const ops::Context& ctx,
                                                                 const std::string& identity = "");

// Lets a step cache steer one forward's block loop. `at_block(b)` is called before block b runs and once
// more after the last block (b = num_layers); it may change h in place (add a cached residual) and returns
// the next block to run: b runs it, a larger index skips the blocks in between (that block then runs without
// another call), num_layers ends the loop. It is never called for a block it skipped to.
struct BlockScheduleContext {
    const DitModel* model = nullptr;
    const AdalnTables* tables = nullptr;
    const DitModel::RowTables* rows = nullptr;
    DitScratch* scratch = nullptr;
    // A rank of a device group: h is its shard, of which the first valid_rows are real rows. Probe distances
    // go through distance() so that every rank decides on the same, group-wide value.
    const DitParallel* parallel = nullptr;
    int64_t valid_rows = -1; // −1: every row of h
    // group_rel_l1 over the valid rows; `local` receives the rank's own distance.
    Result<double> distance(const Tensor& cur, const Tensor& ref, double* local = nullptr) const {
        return group_rel_l1(model->context(), parallel, valid_rows < 0 ? cur.dim(0) : valid_rows, cur, ref,
                            local);
    }
};
class BlockSchedule {
public:
    virtual ~BlockSchedule() = default;
    virtual Result<int> at_block(const BlockScheduleContext& ctx, int b, Tensor& h) = 0;
};

// RoPE cos/sin [S, 6·rope_freq_dim] (f32, host) from positions [S·3] (spec §5.3).
void rope_tables(const DitConfig& config, const std::vector<double>& positions, std::vector<float>& cos,
                 std::vector<float>& sin);
// The [cos, sin] sinusoid of unscaled t, [M, freq_dim] f32 (spec §6.2).
std::vector<float> timestep_sinusoid(const std::vector<float>& t, int freq_dim);

} // namespace h3::model
