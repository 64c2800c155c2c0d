#include "serve/prometheus_metrics.h"

#include "core/cuda_api.h"

#include <cstdio>

namespace h3::serve {

namespace {

std::string number(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
}

void header(std::string& out, const char* name, const char* type, const char* help) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

// Seconds, from tens of milliseconds (the tiny model) to an hour (a long full-size request).
std::vector<double> stage_bounds() {
    return {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600};
}

} // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
    size_t i = 0;
    while (i < bounds_.size() && v > bounds_[i]) ++i;
    ++counts_[i];
    sum_ += v;
    ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& labels) const {
    const std::string sep = labels.empty() ? "" : ",";
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= bounds_.size(); ++i) {
        cumulative += counts_[i];
        const std::string le = i < bounds_.size() ? number(bounds_[i]) : "+Inf";
        out += name + "_bucket{" + labels + sep + "le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
    }
    const std::string braces = labels.empty() ? "" : "{" + labels + "}";
    out += name + "_sum" + braces + " " + number(sum_) + "\n";
    out += name + "_count" + braces + " " + std::to_string(count_) + "\n";
}

Metrics::Metrics()
    : stages_{Histogram(stage_bounds()), Histogram(stage_bounds()), Histogram(stage_bounds()),
              Histogram(stage_bounds())} {
    for (api::JobStatus s : {api::JobStatus::kCompleted, api::JobStatus::kFailed, api::JobStatus::kCancelled})
        final_[api::job_status_name(s)] = 0;
    for (const char* r : {"queue_full", "invalid", "closed"}) rejected_[r] = 0;
}

void Metrics::job_final(api::JobStatus status) {
    std::lock_guard<std::mutex> lock(mu_);
    ++final_[api::job_status_name(status)];
}

void Metrics::job_rejected(const std::string& why) {
    std::lock_guard<std::mutex> lock(mu_);
    ++rejected_[why];
}

void Metrics::set_component_loads(std::function<std::map<std::string, uint64_t>()> source) {
    std::lock_guard<std::mutex> lock(mu_);
    component_loads_ = std::move(source);
}

void Metrics::job_completed(const pipeline::JobReport& r) {
    std::lock_guard<std::mutex> lock(mu_);
    stages_[static_cast<size_t>(pipeline::Stage::kEncode)].observe(r.encode_seconds);
    stages_[static_cast<size_t>(pipeline::Stage::kDenoise)].observe(r.denoise_seconds);
    stages_[static_cast<size_t>(pipeline::Stage::kDecode)].observe(r.decode_seconds);
    stages_[static_cast<size_t>(pipeline::Stage::kMux)].observe(r.mux_seconds);
    useful_flops_ += r.work.useful_flops();
    denoise_seconds_ += r.work.seconds();
    last_tflops_ = r.work.useful_tflops_per_s();
    dit_calls_ += static_cast<uint64_t>(r.work.dit_calls());
    cache_hits_ += static_cast<uint64_t>(r.work.cache_hits());
    blocks_skipped_ += static_cast<uint64_t>(r.work.blocks_skipped());
}

std::string Metrics::render(const QueueGauges& g) const {
    std::lock_guard<std::mutex> lock(mu_);
    std::string out;
    header(out, "h3_requests_total", "counter", "Video jobs by final status.");
    for (const auto& [status, n] : final_)
        out += "h3_requests_total{status=\"" + status + "\"} " + std::to_string(n) + "\n";
    header(out, "h3_requests_rejected_total", "counter", "Submissions refused before queueing, by reason.");
    for (const auto& [why, n] : rejected_)
        out += "h3_requests_rejected_total{reason=\"" + why + "\"} " + std::to_string(n) + "\n";
    header(out, "h3_queue_depth", "gauge", "Jobs waiting for the worker.");
    out += "h3_queue_depth " + std::to_string(g.queue_depth) + "\n";
    header(out, "h3_queue_capacity", "gauge", "Jobs the queue holds before answering 429.");
    out += "h3_queue_capacity " + std::to_string(g.queue_capacity) + "\n";
    header(out, "h3_jobs_running", "gauge", "Jobs the worker is running (0 or 1).");
    out += "h3_jobs_running " + std::to_string(g.running) + "\n";
    header(out, "h3_accepting", "gauge", "1 while the server accepts new jobs.");
    out += std::string("h3_accepting ") + (g.accepting ? "1" : "0") + "\n";
    header(out, "h3_stage_seconds", "histogram", "Latency of the stages of completed jobs.");
    for (pipeline::Stage s : {pipeline::Stage::kEncode, pipeline::Stage::kDenoise, pipeline::Stage::kDecode,
                              pipeline::Stage::kMux})
        stages_[static_cast<size_t>(s)].render(out, "h3_stage_seconds",
                                               std::string("stage=\"") + pipeline::stage_name(s) + "\"");
    header(out, "h3_dit_useful_tflops_per_second", "gauge",
           "Useful DiT TFLOP/s (executed GEMM + attention) of the last completed job.");
    out += "h3_dit_useful_tflops_per_second " + number(last_tflops_) + "\n";
    header(out, "h3_dit_useful_flops_total", "counter", "Useful DiT FLOPs of completed jobs.");
    out += "h3_dit_useful_flops_total " + number(useful_flops_) + "\n";
    header(out, "h3_dit_seconds_total", "counter", "Seconds of DiT denoising of completed jobs.");
    out += "h3_dit_seconds_total " + number(denoise_seconds_) + "\n";
    header(out, "h3_dit_calls_total", "counter", "DiT forwards run by completed jobs.");
    out += "h3_dit_calls_total " + std::to_string(dit_calls_) + "\n";
    header(out, "h3_cache_hits_total", "counter", "Denoise steps served by the step cache.");
    out += "h3_cache_hits_total " + std::to_string(cache_hits_) + "\n";
    header(out, "h3_cache_blocks_skipped_total", "counter", "DiT blocks skipped by the step cache.");
    out += "h3_cache_blocks_skipped_total " + std::to_string(blocks_skipped_) + "\n";
    const DeviceMemoryStats mem = device_memory_stats();
    header(out, "h3_gpu_memory_bytes", "gauge", "Bytes held in device buffers (0 on the CPU).");
    out += "h3_gpu_memory_bytes " + std::to_string(mem.current) + "\n";
    header(out, "h3_gpu_memory_peak_bytes", "gauge",
           "High-water mark of device buffers since the running (or last) job started.");
    out += "h3_gpu_memory_peak_bytes " + std::to_string(mem.peak) + "\n";
    header(out, "h3_component_loads_total", "counter",
           "Model components read from the checkpoint since the server started (resident ones load once).");
    if (component_loads_)
        for (const auto& [component, n] : component_loads_())
            out += "h3_component_loads_total{component=\"" + component + "\"} " + std::to_string(n) + "\n";
    if (g.replicas.is_array() && !g.replicas.empty()) {
        header(out, "h3_replica_up", "gauge", "1 while the replica's processes are up (ready or running).");
        for (const auto& r : g.replicas) {
            const std::string state = r.value("state", std::string());
            out += "h3_replica_up{replica=\"" + std::to_string(r.value("replica", 0)) + "\"} " +
                   (state == "ready" || state == "running" ? "1" : "0") + "\n";
        }
        header(out, "h3_replica_busy", "gauge", "1 while the replica runs a job.");
        for (const auto& r : g.replicas)
            out += "h3_replica_busy{replica=\"" + std::to_string(r.value("replica", 0)) + "\"} " +
                   (r.value("job", nlohmann::json()).is_null() ? "0" : "1") + "\n";
        const std::pair<const char*, const char*> counters[] = {
            {"jobs_done", "Jobs the replica completed."},
            {"failures", "Jobs that failed on the replica."},
            {"restarts", "Times the replica's processes were restarted after one ended."}};
        for (const auto& [key, help] : counters) {
            const std::string name = std::string("h3_replica_") + key + "_total";
            header(out, name.c_str(), "counter", help);
            for (const auto& r : g.replicas)
                out += name + "{replica=\"" + std::to_string(r.value("replica", 0)) + "\"} " +
                       std::to_string(r.value(key, uint64_t{0})) + "\n";
        }
    }
    return out;
}

} // namespace h3::serve
