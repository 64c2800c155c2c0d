#include "model/dit/dit_workspace_keeper.h"

#include "model/dit/dit_model.h"

namespace h3::model {

std::shared_ptr<DitWorkspace> DitWorkspaceKeeper::take() {
    std::lock_guard<std::mutex> lk(m_);
    if (!kept_) {
        kept_ = std::make_shared<DitWorkspace>();
        return kept_;
    }
    // Only this keeper holds it: no request uses it now (a holder that lets go concurrently only lowers the
    // count, so a stale count > 1 merely gives a fresh workspace).
    if (kept_.use_count() == 1) {
        kept_->graphs = DitBlockGraphs{}; // keyed on the last request's tables, whose addresses may recur
        ++reused_;
        return kept_;
    }
    ++busy_;
    return std::make_shared<DitWorkspace>();
}

void DitWorkspaceKeeper::release() {
    std::lock_guard<std::mutex> lk(m_);
    kept_.reset();
}

uint64_t DitWorkspaceKeeper::reused() const {
    std::lock_guard<std::mutex> lk(m_);
    return reused_;
}

uint64_t DitWorkspaceKeeper::busy() const {
    std::lock_guard<std::mutex> lk(m_);
    return busy_;
}

} // namespace h3::model
