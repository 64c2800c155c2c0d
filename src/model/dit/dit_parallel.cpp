#include "model/dit/dit_parallel.h"

#include "ops/reduce.h"

#include <cmath>
#include <limits>
#include <sstream>

namespace h3::model {

Status check_parallel_degrees(const DitConfig& c, int sp, int tp, int ring) {
    const int H = c.num_attention_heads;
    auto allowed = [&] {
        std::ostringstream os;
        for (int d = 1; d <= H; ++d)
            if (H % d == 0) os << (d > 1 ? ", " : "") << d;
        return os.str();
    };
    if (sp < 1 || tp < 1 || ring < 1)
        return invalid_field("sp", "sp " + std::to_string(sp) + ", tp " + std::to_string(tp) + ", ring " +
                                       std::to_string(ring) + ": the degrees must be at least 1");
    if (H % (sp * tp) != 0)
        return invalid_field("sp", "sp " + std::to_string(sp) + ", tp " + std::to_string(tp) +
                                       ": the DiT's " + std::to_string(H) +
                                       " attention heads do not split evenly over sp·tp = " +
                                       std::to_string(sp * tp) + " ranks; allowed sp·tp: " + allowed());
    return ok_status();
}

SpShard sp_shard(int64_t rows, int size, int rank) {
    SpShard s;
    s.rows = rows;
    s.padded = (rows + size - 1) / size * size;
    s.local = s.padded / size;
    s.begin = s.local * rank;
    s.valid = std::max<int64_t>(0, std::min<int64_t>(s.local, rows - s.begin));
    return s;
}

Result<double> group_rel_l1(const ops::Context& ctx, const DitParallel* parallel, int64_t valid,
                            const Tensor& cur, const Tensor& ref, double* local) {
    auto ratio = [](double diff, double sum) {
        if (sum == 0) return diff == 0 ? 0.0 : std::numeric_limits<double>::infinity();
        return diff / sum;
    };
    ops::L1Sums s;
    if (valid > 0) {
        H3_ASSIGN_OR_RETURN(s, ops::l1_sums(ctx, cur.slice(0, 0, valid), ref.slice(0, 0, valid)));
    }
    if (local) *local = ratio(s.diff, s.ref);
    if (!parallel || !parallel->seq) return ratio(s.diff, s.ref);
    Tensor sums = Tensor::host(Shape{2}, DType::kF64);
    sums.data_as<double>()[0] = s.diff;
    sums.data_as<double>()[1] = s.ref;
    if (ctx.device.is_cpu()) {
        H3_TRY(parallel->seq->all_reduce_sum(ctx, sums));
    } else {
        H3_ASSIGN_OR_RETURN(Tensor d, sums.to(ctx.device, ctx.stream()));
        H3_TRY(parallel->seq->all_reduce_sum(ctx, d));
        H3_ASSIGN_OR_RETURN(sums, d.to(Device::cpu(), ctx.stream()));
    }
    return ratio(sums.data_as<double>()[0], sums.data_as<double>()[1]);
}

BlockCommBytes block_comm_bytes(const DitConfig& c, int64_t rows, int sp, int tp, int activation_bytes,
                                int ring) {
    BlockCommBytes b;
    const double local_rows = std::ceil(static_cast<double>(rows) / (static_cast<double>(sp) * ring));
    if (sp > 1) {
        const double tensor = local_rows * (static_cast<double>(c.inner_dim()) / tp) * activation_bytes;
        b.all_to_all = 4.0 * tensor * (sp - 1) / sp; // q, k, v out and o back
    }
    if (ring > 1) { // the K and V of this rank's chunk (chunk rows × its sp·tp share of the heads), R−1 hops
        const double chunk =
            local_rows * sp * (static_cast<double>(c.inner_dim()) / (sp * tp)) * activation_bytes;
        b.ring = 2.0 * chunk * (ring - 1);
    }
    if (tp > 1) {
        const double partial = local_rows * c.hidden_size * 4.0; // fp32
        b.all_reduce = 2.0 * partial * 2.0 * (tp - 1) / tp;      // to_out and fc2, ring all-reduce
    }
    return b;
}

int ulysses_overlap_groups(int64_t heads, int requested, bool ring) {
    if (ring || heads < 2) return 1;
    if (requested > 0) return heads % requested == 0 ? requested : 1;
    for (int g = 2; g <= heads / 4; ++g)
        if (heads % g == 0) return g;
    return 1;
}

} // namespace h3::model
