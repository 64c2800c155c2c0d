// h3-bench attention [--seq S]... [--heads H] [--kv-heads Hkv] [--head-dim D] [--batch B] [--causal]
//                    [--fp8] [--lse] [--only TEXT] [--iters K] [--rounds R] [--check-rows N]
//                    [--device cuda] [--json]
// Every attention implementation and configuration that can run the shape (ops::attention_candidates: the
// sm_90a kernel's variants, each cuDNN engine config the heuristics offer, the fallback kernel; with --fp8
// also the e4m3 kernel), timed in the same process on the same random bf16 inputs — rounds interleave the
// candidates so clock and power drift hit them alike (median over rounds) — with TFLOP/s, the ratio to the
// default cuDNN plan and the error on N sampled (row, head) pairs against an exact double-precision host
// reference. --only TEXT keeps the candidates whose name contains TEXT. --batch B runs B independent
// sequences of S rows in one call (ops::AttentionParams::batch, the video VAE decoder's tiles: --head-dim 64
// --heads 32 --batch 14 --seq 1797). --lse: every call also returns the log-sum-exp (ring attention's
// partials; the candidates that can: the sm_90a kernels and the fallback).
#include "bench/commands.h"
#include "core/cuda_api.h"
#include "ops/ops.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace h3::bench {

namespace {

struct Sample {
    int64_t row, head;
    std::vector<double> want; // [D]
};

// Exact softmax(q·kᵀ·scale)·v for the sampled (row, head) pairs, from the bf16 inputs, in double. With a
// batch, row r belongs to item r / Sq and sees only that item's keys.
std::vector<Sample> reference_rows(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                                   int64_t batch, int n, uint32_t seed) {
    const int64_t rows = q.dim(0), h = q.dim(1), d = q.dim(2), hkv = k.dim(1);
    const int64_t s = rows / batch, sk = k.dim(0) / batch; // per item
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    std::mt19937 gen(seed);
    std::vector<Sample> out(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) { // the last row is always checked (the partial tile's padding rows), and
                                  // with a batch the first item's last row (next to an item boundary)
        int64_t row = static_cast<int64_t>(gen() % static_cast<uint32_t>(rows));
        if (i == 0) row = rows - 1;
        if (i == 1 && batch > 1) row = s - 1;
        out[static_cast<size_t>(i)].row = row;
        out[static_cast<size_t>(i)].head = static_cast<int64_t>(gen() % static_cast<uint32_t>(h));
    }
    const uint16_t* qb = q.data_as<const uint16_t>();
    const uint16_t* kb = k.data_as<const uint16_t>();
    const uint16_t* vb = v.data_as<const uint16_t>();
    for (int i = 0; i < n; ++i) {
        Sample& smp = out[static_cast<size_t>(i)];
        const int64_t item = smp.row / s, local = smp.row % s, k0 = item * sk;
        const int64_t hk = smp.head / (h / hkv), nk = causal ? std::min(sk, local + 1) : sk;
        const uint16_t* qr = qb + (smp.row * h + smp.head) * d;
        std::vector<double> sc(static_cast<size_t>(nk));
        double mx = -1e300;
        for (int64_t j = 0; j < nk; ++j) {
            const uint16_t* kr = kb + ((k0 + j) * hkv + hk) * d;
            double dot = 0;
            for (int64_t c = 0; c < d; ++c)
                dot += static_cast<double>(bf16_to_f32(qr[c])) * bf16_to_f32(kr[c]);
            sc[static_cast<size_t>(j)] = dot * scale;
            mx = std::max(mx, dot * scale);
        }
        double sum = 0;
        for (double& x : sc) sum += (x = std::exp(x - mx));
        smp.want.assign(static_cast<size_t>(d), 0.0);
        for (int64_t j = 0; j < nk; ++j) {
            const uint16_t* vr = vb + ((k0 + j) * hkv + hk) * d;
            const double p = sc[static_cast<size_t>(j)] / sum;
            for (int64_t c = 0; c < d; ++c) smp.want[static_cast<size_t>(c)] += p * bf16_to_f32(vr[c]);
        }
    }
    return out;
}

struct Errors {
    double max_abs = 0, rel_rms = 0;
};

Errors compare(const Tensor& o_host, const std::vector<Sample>& samples) {
    const int64_t h = o_host.dim(1), d = o_host.dim(2);
    const uint16_t* ob = o_host.data_as<const uint16_t>();
    double num = 0, den = 0;
    Errors e;
    for (const Sample& s : samples)
        for (int64_t c = 0; c < d; ++c) {
            const double got = bf16_to_f32(ob[(s.row * h + s.head) * d + c]),
                         want = s.want[static_cast<size_t>(c)];
            const double err = std::isfinite(got) ? std::fabs(got - want) : INFINITY;
            e.max_abs = std::max(e.max_abs, err);
            num += err * err;
            den += want * want;
        }
    e.rel_rms = std::sqrt(num / std::max(den, 1e-300));
    return e;
}

} // namespace

Command attention_command() {
    struct Options {
        std::vector<int64_t> seq = {38247};
        int heads = 56, kv_heads = 0, head_dim = 128, batch = 1, iters = 3, rounds = 2, check_rows = 48;
        bool causal = false, fp8 = false, lse = false, json = false;
        std::string device = "cuda", only;
        CLI::App* sub = nullptr;
    };
    auto o = std::make_shared<Options>();
    Command c;
    c.setup = [o](CLI::App& bench) {
        o->sub = bench.add_subcommand("attention",
                                      "attention implementations and configurations, head dim 64 or 128");
        o->sub->add_option("--seq", o->seq, "sequence lengths (queries = keys)")->capture_default_str();
        o->sub->add_option("--heads", o->heads, "query heads")->capture_default_str();
        o->sub->add_option("--kv-heads", o->kv_heads, "kv heads (0: = heads)")->capture_default_str();
        o->sub->add_option("--head-dim", o->head_dim, "head dim (64 or 128)")->capture_default_str();
        o->sub
            ->add_option("--batch", o->batch,
                         "independent sequences of --seq rows in one call (the video VAE decoder's tiles)")
            ->capture_default_str();
        o->sub->add_flag("--causal", o->causal, "causal mask (the text encoder's attention)");
        o->sub->add_flag("--fp8", o->fp8, "also the e4m3 kernel (ops::AttentionParams::fp8)");
        o->sub->add_flag("--lse", o->lse,
                         "every call also returns the log-sum-exp (ring attention's partials)");
        o->sub->add_option("--only", o->only, "only the candidates whose name contains this text");
        o->sub->add_option("--iters", o->iters, "timed calls per candidate per round")->capture_default_str();
        o->sub->add_option("--rounds", o->rounds, "rounds over all candidates")->capture_default_str();
        o->sub
            ->add_option("--check-rows", o->check_rows,
                         "(row, head) pairs checked against the exact reference")
            ->capture_default_str();
        o->sub->add_option("--device", o->device, "cuda | cuda:N")->capture_default_str();
        o->sub->add_flag("--json", o->json, "JSON output");
    };
    c.parsed = [o] { return o->sub && o->sub->parsed(); };
    c.run = [o]() -> int {
        using Clock = std::chrono::steady_clock;
        if (o->iters < 1 || o->rounds < 1 || o->heads < 1 || o->check_rows < 1 || o->batch < 1)
            return report(
                invalid_argument("--heads, --batch, --iters, --rounds and --check-rows must be >= 1"));
        if (o->head_dim != 64 && o->head_dim != 128)
            return report(
                invalid_argument("--head-dim must be 64 or 128, not " + std::to_string(o->head_dim)));
        const int64_t H = o->heads, Hkv = o->kv_heads > 0 ? o->kv_heads : o->heads, D = o->head_dim,
                      B = o->batch;
        if (H % Hkv) return report(invalid_argument("--heads must be a multiple of --kv-heads"));
        auto session = DeviceSession::open(o->device);
        if (!session.ok()) return report(session.status());
        const ops::Context& ctx = (*session)->context();
        nlohmann::json all = nlohmann::json::array();
        for (int64_t S : o->seq) {
            if (S < 1) return report(invalid_argument("--seq values must be >= 1"));
            auto mk = [&](int64_t heads) {
                return Tensor::empty(Shape{B * S, heads, D}, DType::kBF16, ctx.device);
            };
            auto q = mk(H), k = mk(Hkv), v = mk(Hkv), out = mk(H);
            auto lse = Tensor::empty(Shape{B * S, H}, DType::kF32, ctx.device);
            if (!q.ok() || !k.ok() || !v.ok() || !out.ok() || !lse.ok())
                return report(internal_error("attention buffers"));
            // Unit-variance q and k (scores ~ N(0, 1) after the 1/sqrt(D) scale, like RMS-normed DiT heads).
            Status st = ops::fill_uniform(ctx, {.seed = 11, .bound = 1.7320508f}, *q);
            if (st.ok()) st = ops::fill_uniform(ctx, {.seed = 12, .bound = 1.7320508f}, *k);
            if (st.ok()) st = ops::fill_uniform(ctx, {.seed = 13, .bound = 1.0f}, *v);
            if (!st.ok()) return report(st);
            auto qh = q->to(Device::cpu()), kh = k->to(Device::cpu()), vh = v->to(Device::cpu());
            if (!qh.ok() || !kh.ok() || !vh.ok())
                return report(internal_error("copying the inputs to the host"));
            const std::vector<Sample> samples = reference_rows(*qh, *kh, *vh, o->causal, B, o->check_rows, 5);
            const ops::AttentionParams base{.causal = o->causal, .lse = o->lse ? &*lse : nullptr, .batch = B};
            const double work = static_cast<double>(S) * static_cast<double>(S) * static_cast<double>(B);
            struct Cand {
                std::string name;
                bool fp8;
                std::vector<double> secs;
                Errors err;
                Status status = ok_status();
            };
            std::vector<Cand> cands;
            for (const std::string& n : ops::attention_candidates(ctx, base, *q, *k, *v, *out))
                if (n != "fallback" || work <= 16384.0 * 16384.0) // the simple kernel takes seconds beyond
                    cands.push_back({n, false, {}, {}});
            if (o->fp8) {
                ops::AttentionParams f = base;
                f.fp8 = true;
                for (const std::string& n : ops::attention_candidates(ctx, f, *q, *k, *v, *out))
                    cands.push_back({n, true, {}, {}});
            }
            std::erase_if(cands, [&](const Cand& cd) { return cd.name.find(o->only) == std::string::npos; });
            if (cands.empty())
                return report(invalid_argument("--only '" + o->only +
                                               "' matches no candidate for S=" + std::to_string(S)));
            for (int r = 0; r < o->rounds; ++r)
                for (Cand& cd : cands) {
                    if (!cd.status.ok()) continue;
                    ops::AttentionParams p = base;
                    p.fp8 = cd.fp8;
                    const bool slow = cd.name == "fallback" && work > 4096.0 * 4096.0; // time it once
                    if (slow && r > 0) continue;
                    if (r == 0) { // warm-up (plans, tensor maps) and the error check
                        Status s = ops::fill_uniform(ctx, {.seed = 99, .bound = 1e4f}, *out); // poison
                        if (s.ok()) s = ops::attention_candidate(ctx, cd.name, p, *q, *k, *v, *out);
                        if (s.ok()) s = (*session)->synchronize();
                        if (!s.ok()) {
                            cd.status = s;
                            continue;
                        }
                        auto oh = out->to(Device::cpu());
                        if (!oh.ok()) return report(oh.status());
                        cd.err = compare(*oh, samples);
                    }
                    const int iters = slow ? 1 : o->iters;
                    const auto t0 = Clock::now();
                    Status s = ok_status();
                    for (int i = 0; i < iters && s.ok(); ++i)
                        s = ops::attention_candidate(ctx, cd.name, p, *q, *k, *v, *out);
                    if (s.ok()) s = (*session)->synchronize();
                    if (!s.ok()) {
                        cd.status = s;
                        continue;
                    }
                    cd.secs.push_back(std::chrono::duration<double>(Clock::now() - t0).count() / iters);
                }
            const double flops = 4.0 * work * static_cast<double>(H * D) * (o->causal ? 0.5 : 1.0);
            auto median = [](std::vector<double> x) {
                std::sort(x.begin(), x.end());
                return x.empty() ? 0.0 : x[x.size() / 2];
            };
            double cudnn_s = 0;
            for (const Cand& cd : cands)
                if (cudnn_s == 0 && cd.name.rfind("cudnn", 0) == 0 && !cd.secs.empty())
                    cudnn_s = median(cd.secs);
            if (!o->json)
                std::printf("attention S=%lld H=%lld Hkv=%lld D=%lld%s%s: %.2f TFLOP per call\n%-58s %9s "
                            "%8s %8s %10s %9s\n",
                            static_cast<long long>(S), static_cast<long long>(H), static_cast<long long>(Hkv),
                            static_cast<long long>(D), B > 1 ? (" batch=" + std::to_string(B)).c_str() : "",
                            o->causal ? (o->lse ? " causal lse" : " causal") : (o->lse ? " lse" : ""),
                            flops / 1e12, "candidate", "ms", "TFLOP/s", "x cudnn", "max err", "rel rms");
            for (const Cand& cd : cands) {
                const double s = median(cd.secs);
                nlohmann::json j = {
                    {"seq", S},     {"heads", H},          {"kv_heads", Hkv},      {"head_dim", D},
                    {"batch", B},   {"causal", o->causal}, {"candidate", cd.name}, {"fp8", cd.fp8},
                    {"lse", o->lse}};
                if (!cd.status.ok() || cd.secs.empty()) {
                    j["error"] = cd.status.to_string();
                    if (!o->json)
                        std::printf("%-58s failed: %s\n", cd.name.c_str(), cd.status.to_string().c_str());
                } else {
                    j["seconds"] = s;
                    j["seconds_per_round"] = cd.secs;
                    j["tflops"] = flops / s / 1e12;
                    j["speed_vs_cudnn_default"] = cudnn_s > 0 ? cudnn_s / s : 0.0;
                    j["max_abs_err"] = cd.err.max_abs;
                    j["rel_rms_err"] = cd.err.rel_rms;
                    if (!o->json)
                        std::printf("%-58s %9.3f %8.1f %8.3f %10.2e %9.2e\n", cd.name.substr(0, 58).c_str(),
                                    s * 1e3, flops / s / 1e12, cudnn_s > 0 ? cudnn_s / s : 0.0,
                                    cd.err.max_abs, cd.err.rel_rms);
                }
                all.push_back(j);
            }
        }
        if (o->json) std::printf("%s\n", all.dump(2).c_str());
        return kExitOk;
    };
    return c;
}

} // namespace h3::bench
