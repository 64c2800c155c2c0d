#include "cli/parallel_flags.h"

#include "cli/field_flags.h"
#include "model/dit/dit_parallel.h"
#include "pipeline/generate_group.h"

#include <sstream>

namespace h3::cli {

void add_parallel_flags(CLI::App* sub, ParallelFlags& f) {
    sub->add_option("--sp", f.sp,
                    "sequence-parallel ranks of the DiT (Ulysses all-to-all around attention; the heads must "
                    "split over sp·tp)")
        ->check(CLI::Range(1, 1024))
        ->capture_default_str();
    sub->add_option("--ring", f.ring,
                    "ring-attention degree of the DiT: the sequence split over ring × sp ranks, K/V passed "
                    "around the ring, partials merged by their log-sum-exp (sp inside a node, ring across)")
        ->check(CLI::Range(1, 1024))
        ->capture_default_str();
    sub->add_option(
           "--tp", f.tp,
           "tensor-parallel ranks of the DiT (q/k/v and fc1 column split, out and fc2 row split, fp32 "
           "all-reduce)")
        ->check(CLI::Range(1, 1024))
        ->capture_default_str();
    sub->add_option(
        "--gpus", f.gpus,
        "CUDA devices of the ranks, one per rank (e.g. 0,1,2,3); the CPU runs its ranks as threads "
        "without it");
}

void add_launch_flag(CLI::App* sub, ParallelFlags& f) {
    sub->add_option("--launch", f.launch,
                    "ranks of this host as threads of this process or as child processes (RANK / WORLD_SIZE "
                    "/ MASTER_PORT each; auto: processes for several --gpus)")
        ->check(CLI::IsMember({"auto", "threads", "processes"}))
        ->capture_default_str();
}

bool wants_rank_processes(const ParallelFlags& f, const Device& device, bool launched) {
    if (launched || f.sp * f.tp * f.ring <= 1) return false;
    if (f.launch == "processes") return true;
    return f.launch == "auto" && device.is_cuda() && f.gpus.find(',') != std::string::npos;
}

Status apply_parallel_flags(const ParallelFlags& f, runtime::PlacementPlan& plan) {
    plan.parallel.sp = f.sp;
    plan.parallel.tp = f.tp;
    plan.parallel.ring = f.ring;
    plan.parallel.gpus.clear();
    if (!f.gpus.empty()) {
        std::stringstream ss(f.gpus);
        std::string item;
        while (std::getline(ss, item, ',')) {
            char* end = nullptr;
            const long v = std::strtol(item.c_str(), &end, 10);
            if (item.empty() || end != item.c_str() + item.size() || v < 0 || v > 1023)
                return invalid_argument("--gpus: '" + item +
                                        "' is not a device index (give e.g. --gpus 0,1)");
            plan.parallel.gpus.push_back(static_cast<int>(v));
        }
    }
    // One rank on one named GPU is no group: the components run on that device.
    if (plan.parallel.world() == 1 && plan.parallel.gpus.size() == 1 && !plan.parallel.process.active()) {
        for (auto& c : plan.components)
            if (c.device.is_cuda()) c.device = Device::cuda(plan.parallel.gpus[0]);
        if (plan.components[0].device.is_cuda()) plan.parallel.gpus.clear();
    }
    return plan.validate();
}

Status check_ranks_in_process(const runtime::PlacementPlan& plan, const std::string& instead) {
    const Status s = pipeline::check_group_device(plan.parallel, plan.components[0].device);
    if (s.ok()) return s;
    return Status(s.code(), with_flag(s, "parallel.gpus").message() + "; " + instead);
}

Status check_parallel_flags(const runtime::PlacementPlan& plan, const model::DitConfig* dit) {
    if (!plan.parallel.active() || !dit) return ok_status();
    return model::check_parallel_degrees(*dit, plan.parallel.sp, plan.parallel.tp, plan.parallel.ring);
}

} // namespace h3::cli
