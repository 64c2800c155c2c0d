#include "cli/parallel_flags.h"

#include "cli/field_flags.h"
#include "pipeline/generate_group.h"

#include <sstream>

namespace h3::cli {

void add_parallel_flags(CLI::App* sub, ParallelFlags& f, bool launch) {
    CLI::App* g = sub->add_option_group("Multi-GPU", "the DiT's device group (docs/multi-gpu.md)");
    g->add_option("--sp", f.sp, "sequence-parallel (Ulysses) ranks; heads must split over sp·tp")
        ->check(CLI::Range(1, 1024))
        ->capture_default_str();
    g->add_option("--ring", f.ring, "ring-attention degree (the sequence over ring × sp ranks)")
        ->check(CLI::Range(1, 1024))
        ->capture_default_str();
    g->add_option("--tp", f.tp, "tensor-parallel ranks")->check(CLI::Range(1, 1024))->capture_default_str();
    g->add_option("--gpus", f.gpus, "CUDA devices of the ranks, one per rank, e.g. 0,1 (default none)");
    if (!launch) return;
    g->add_option("--launch", f.launch, "ranks as threads or child processes: auto | threads | processes")
        ->check(CLI::IsMember({"auto", "threads", "processes"}))
        ->capture_default_str();
}

bool wants_rank_processes(const ParallelFlags& f, const Device& device, bool launched) {
    if (launched || f.sp * f.tp * f.ring <= 1) return false;
    if (f.launch == "processes") return true;
    return f.launch == "auto" && device.is_cuda() && f.gpus.find(',') != std::string::npos;
}

Result<std::vector<int>> parse_gpus(const std::string& text) {
    std::vector<int> gpus;
    if (text.empty()) return gpus;
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ',')) {
        char* end = nullptr;
        const long v = std::strtol(item.c_str(), &end, 10);
        if (item.empty() || end != item.c_str() + item.size() || v < 0 || v > 1023)
            return invalid_field("gpus", "gpus: '" + item + "' is not a device index (e.g. 0,1)");
        gpus.push_back(static_cast<int>(v));
    }
    return gpus;
}

Status check_ranks_in_process(const runtime::PlacementPlan& plan, const std::string& instead) {
    const Status s = pipeline::check_group_device(plan.parallel, plan.components[0].device);
    if (s.ok()) return s;
    return Status(s.code(), with_flag(s, "parallel.gpus").message() + "; " + instead);
}

} // namespace h3::cli
