#include "core/one_time_work.h"

namespace h3 {

namespace {
thread_local OneTimeCounter* t_counter = nullptr;
thread_local AllocationTally* t_tally = nullptr;
} // namespace

OneTimeWork& OneTimeWork::operator+=(const OneTimeWork& o) {
    gemm_tunings += o.gemm_tunings;
    gemm_tuning_seconds += o.gemm_tuning_seconds;
    attention_plans += o.attention_plans;
    attention_plan_seconds += o.attention_plan_seconds;
    workspace_allocations += o.workspace_allocations;
    workspace_bytes += o.workspace_bytes;
    graph_recordings += o.graph_recordings;
    graph_recording_seconds += o.graph_recording_seconds;
    return *this;
}

OneTimeWork operator-(OneTimeWork a, const OneTimeWork& b) {
    a.gemm_tunings -= b.gemm_tunings;
    a.gemm_tuning_seconds -= b.gemm_tuning_seconds;
    a.attention_plans -= b.attention_plans;
    a.attention_plan_seconds -= b.attention_plan_seconds;
    a.workspace_allocations -= b.workspace_allocations;
    a.workspace_bytes -= b.workspace_bytes;
    a.graph_recordings -= b.graph_recordings;
    a.graph_recording_seconds -= b.graph_recording_seconds;
    return a;
}

bool OneTimeWork::none() const {
    return gemm_tunings == 0 && attention_plans == 0 && workspace_allocations == 0 && graph_recordings == 0;
}

void OneTimeCounter::add(const OneTimeWork& w) {
    std::lock_guard<std::mutex> lk(m_);
    total_ += w;
}

OneTimeWork OneTimeCounter::total() const {
    std::lock_guard<std::mutex> lk(m_);
    return total_;
}

OneTimeScope::OneTimeScope(OneTimeCounter* counter) : previous_(t_counter) {
    if (counter) t_counter = counter;
}

OneTimeScope::~OneTimeScope() {
    t_counter = previous_;
}

OneTimeCounter* one_time_counter() {
    return t_counter;
}

void note_one_time(const OneTimeWork& w) {
    if (t_counter) t_counter->add(w);
}

void note_workspace_allocation(size_t bytes) {
    note_one_time({.workspace_allocations = 1, .workspace_bytes = bytes});
}

AllocationTally::AllocationTally() : previous_(t_tally) {
    t_tally = this;
}

AllocationTally::~AllocationTally() {
    t_tally = previous_;
}

void AllocationTally::note_as_workspace() {
    if (count_ > 0) note_one_time({.workspace_allocations = count_, .workspace_bytes = bytes_});
    count_ = 0;
    bytes_ = 0;
}

void AllocationTally::count_allocation(size_t bytes) {
    for (AllocationTally* t = t_tally; t; t = t->previous_) {
        ++t->count_;
        t->bytes_ += bytes;
    }
}

} // namespace h3
