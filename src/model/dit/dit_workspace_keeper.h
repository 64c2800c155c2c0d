// The DiT workspace a model keeps between requests (issue #45, no first-step penalty): a request of the
// same shape as the last one finds its buffers made (model/dit/dit_model.h DitWorkspace), so its first
// forward allocates nothing. take() hands the kept workspace to one request at a time: while a request holds
// it, another gets a fresh one of its own (never shared by two concurrent requests). A request of another
// shape reallocates the kept one (DitModel::prepare_workspace releases the old buffers first); release()
// drops it (its buffers go when the last request holding it ends).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>

namespace h3::model {

struct DitWorkspace;

class DitWorkspaceKeeper {
public:
    // The kept workspace when no request holds it (its block recordings cleared: they were made over the
    // last request's tables), else a fresh one; the first call keeps what it returns.
    std::shared_ptr<DitWorkspace> take();
    void release();
    // Requests that got the kept workspace / a fresh one while it was held (tests and metrics).
    uint64_t reused() const;
    uint64_t busy() const;

private:
    mutable std::mutex m_;
    std::shared_ptr<DitWorkspace> kept_;
    uint64_t reused_ = 0, busy_ = 0;
};

} // namespace h3::model
