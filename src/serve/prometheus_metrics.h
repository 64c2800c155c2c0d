// The server's Prometheus metrics (text exposition format 0.0.4): requests by final status and
// rejections, queue depth, stage latency histograms (encode, denoise, decode, mux), the DiT's useful
// TFLOP/s, step-cache hits and DiT calls, device memory in use, and the model store's loads per component
// (h3_component_loads_total{component="vae_decoder"}: a warm server does not read its decoders again).
// Thread-safe.
#pragma once

#include "pipeline/generator.h"
#include "serve/wire/video_object.h"

#include <functional>

#include <array>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace h3::serve {

class Histogram {
public:
    explicit Histogram(std::vector<double> bounds);
    void observe(double v);
    // `name{labels,le="..."}` lines, _sum and _count. `labels` is "" or `stage="denoise"`.
    void render(std::string& out, const std::string& name, const std::string& labels) const;

private:
    std::vector<double> bounds_;
    std::vector<uint64_t> counts_; // per bucket (not cumulative); the last is +Inf
    double sum_ = 0;
    uint64_t count_ = 0;
};

struct QueueGauges {
    size_t queue_depth = 0, queue_capacity = 0, running = 0;
    bool accepting = true;
    nlohmann::json replicas = {}; // a server of replicas: Worker::status() of each (null: none)
};

class Metrics {
public:
    Metrics();
    void job_final(api::JobStatus status);            // a job reached a final status
    void job_rejected(const std::string& why);        // "queue_full", "invalid", "closed"
    void job_completed(const pipeline::JobReport& r); // stage latencies and work counters
    // Where the component loads come from (the job runner's store); read on every render.
    void set_component_loads(std::function<std::map<std::string, uint64_t>()> source);
    std::string render(const QueueGauges& gauges) const;

private:
    mutable std::mutex mu_;
    std::map<std::string, uint64_t> final_, rejected_;
    std::array<Histogram, 4> stages_; // indexed by pipeline::Stage
    double useful_flops_ = 0, denoise_seconds_ = 0, last_tflops_ = 0;
    uint64_t dit_calls_ = 0, cache_hits_ = 0, blocks_skipped_ = 0;
    std::function<std::map<std::string, uint64_t>()> component_loads_;
};

} // namespace h3::serve
