// The in-process CPU communicator (ops/communicator.h): the ranks are threads of this process and meet at a
// rendezvous per group. A collective is two meetings: at the first every rank has posted its buffers, then
// each rank does its own part of the data movement reading the others' buffers, and at the second every rank
// is done reading (only then may a rank write a buffer that others read: the in-place all-reduce result).
// Sums run in rank order in fp32 (f64 for f64) and round once, so every rank holds the same bits. A rank
// waiting at a meeting reads its thread's cancel flag (ops/cancel.h) every kCancelPoll: a cancelled job
// aborts the group, and every rank's collective returns kCancelled.
#include "core/check.h"
#include "core/dtype.h"
#include "ops/cancel.h"
#include "ops/communicator.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <sstream>

namespace h3::ops {

namespace {

struct AbortState;

constexpr std::chrono::milliseconds kCancelPoll{50};

// One group's meeting point.
class Rendezvous {
public:
    Rendezvous(int size, CommOptions options, std::shared_ptr<AbortState> abort)
        : size_(size), options_(options), abort_(std::move(abort)), posts_(static_cast<size_t>(size)),
          arrivals_(static_cast<size_t>(size), 0) {}

    struct Post {
        const char* op = "";
        DType dtype = DType::kF32;
        int64_t numel = 0;
        int root = 0;
        const void* send = nullptr;
        void* recv = nullptr;
    };
    using Work = std::function<Status(int rank, const std::vector<Post>& posts)>;

    // Runs one collective for `rank`: post, meet, `work`, meet, `finish`.
    Status run(int rank, const Post& post, const Work& work, const std::function<void()>& finish);
    void wake() {
        std::lock_guard<std::mutex> lk(m_);
        cv_.notify_all();
    }
    int size() const { return size_; }
    const std::shared_ptr<AbortState>& abort_state() const { return abort_; }

private:
    Status meet(std::unique_lock<std::mutex>& lk, int rank, const char* op);

    const int size_;
    const CommOptions options_;
    std::shared_ptr<AbortState> abort_;
    std::mutex m_;
    std::condition_variable cv_;
    uint64_t generation_ = 0;
    int count_ = 0;
    std::vector<Post> posts_;
    std::vector<uint64_t> arrivals_; // meetings each rank reached (names the late ranks on a timeout)
};

// Shared by a root group and every sub-group made from it.
struct AbortState {
    std::atomic<bool> aborted{false};
    std::mutex m;
    std::string reason;
    bool cancelled = false; // the first abort was a job's cancellation
    std::vector<std::weak_ptr<Rendezvous>> groups;

    void abort(const std::string& why, bool cancel = false) {
        std::vector<std::shared_ptr<Rendezvous>> wake;
        {
            std::lock_guard<std::mutex> lk(m);
            if (!aborted.exchange(true)) {
                reason = why;
                cancelled = cancel;
            }
            for (auto& g : groups)
                if (auto s = g.lock()) wake.push_back(std::move(s));
        }
        for (auto& g : wake) g->wake();
    }
    std::string why() {
        std::lock_guard<std::mutex> lk(m);
        return reason;
    }
};

Status aborted_status(AbortState& a, int rank, const char* op) {
    std::string m = std::string("communicator ") + op + " on rank " + std::to_string(rank) +
                    ": the group was aborted (" + a.why() + ")";
    std::lock_guard<std::mutex> lk(a.m);
    return a.cancelled ? cancelled(std::move(m)) : internal_error(std::move(m));
}

Status Rendezvous::meet(std::unique_lock<std::mutex>& lk, int rank, const char* op) {
    if (abort_->aborted) return aborted_status(*abort_, rank, op);
    const uint64_t gen = generation_;
    ++arrivals_[static_cast<size_t>(rank)];
    if (++count_ == size_) {
        count_ = 0;
        ++generation_;
        cv_.notify_all();
        return ok_status();
    }
    // wait in slices, reading the job's cancel flag between them
    const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
    const std::atomic<bool>* cancel = cancel_flag();
    bool met = false;
    while (!met) {
        const auto left = deadline - std::chrono::steady_clock::now();
        if (left <= std::chrono::steady_clock::duration::zero()) break;
        const auto slice = cancel ? std::min<std::chrono::steady_clock::duration>(left, kCancelPoll) : left;
        met = cv_.wait_for(lk, slice, [&] { return generation_ != gen || abort_->aborted; });
        if (!met && cancel_requested(cancel)) {
            const std::string why = "rank " + std::to_string(rank) + "'s job was cancelled in " + op;
            lk.unlock();
            abort_->abort(why, true);
            lk.lock();
            return cancelled("communicator " + std::string(op) + ": " + why);
        }
    }
    if (generation_ != gen) return ok_status();
    if (met) return aborted_status(*abort_, rank, op);
    std::ostringstream late;
    const uint64_t mine = arrivals_[static_cast<size_t>(rank)];
    for (int r = 0; r < size_; ++r)
        if (arrivals_[static_cast<size_t>(r)] < mine) late << (late.tellp() > 0 ? "," : "") << r;
    const std::string why = std::string("rank ") + std::to_string(rank) + " waited " +
                            std::to_string(options_.timeout.count()) + " ms in " + op + " for rank(s) " +
                            late.str();
    lk.unlock();
    abort_->abort(why);
    lk.lock();
    return internal_error("communicator " + std::string(op) + " timed out: " + why);
}

Status Rendezvous::run(int rank, const Post& post, const Work& work, const std::function<void()>& finish) {
    std::unique_lock<std::mutex> lk(m_);
    posts_[static_cast<size_t>(rank)] = post;
    H3_TRY(meet(lk, rank, post.op));
    const Post& first = posts_[0];
    Status st = ok_status();
    if (std::strcmp(first.op, post.op) != 0 || first.dtype != post.dtype || first.numel != post.numel ||
        first.root != post.root)
        st = internal_error(std::string("communicator: rank ") + std::to_string(rank) + " called " + post.op +
                            " on " + std::to_string(post.numel) + " " + dtype_name(post.dtype) +
                            " while rank 0 called " + first.op + " on " + std::to_string(first.numel) + " " +
                            dtype_name(first.dtype) + " (the ranks' collectives must match)");
    const std::vector<Post> posts = posts_;
    lk.unlock();
    if (st.ok()) st = work(rank, posts);
    if (!st.ok()) { // the others learn it at the second meeting
        abort_->abort(st.message());
        return st;
    }
    lk.lock();
    const Status second = meet(lk, rank, post.op);
    lk.unlock();
    H3_TRY(second);
    if (finish) finish();
    return ok_status();
}

// Σ over ranks in rank order: fp32 accumulation (f64 for f64), one rounding to the dtype.
void reduce_into(DType dtype, int64_t n, const std::vector<Rendezvous::Post>& posts,
                 std::vector<uint8_t>& out) {
    out.resize(static_cast<size_t>(n) * dtype_size(dtype));
    if (dtype == DType::kF64) {
        double* o = reinterpret_cast<double*>(out.data());
        for (int64_t i = 0; i < n; ++i) {
            double s = 0;
            for (const auto& p : posts) s += static_cast<const double*>(p.send)[i];
            o[i] = s;
        }
        return;
    }
    if (dtype == DType::kF32) {
        float* o = reinterpret_cast<float*>(out.data());
        for (int64_t i = 0; i < n; ++i) {
            float s = 0;
            for (const auto& p : posts) s += static_cast<const float*>(p.send)[i];
            o[i] = s;
        }
        return;
    }
    uint16_t* o = reinterpret_cast<uint16_t*>(out.data()); // bf16
    for (int64_t i = 0; i < n; ++i) {
        float s = 0;
        for (const auto& p : posts) s += bf16_to_f32(static_cast<const uint16_t*>(p.send)[i]);
        o[i] = f32_to_bf16(s);
    }
}

class CpuCommunicator final : public Communicator {
public:
    CpuCommunicator(std::shared_ptr<Rendezvous> group, int rank) : group_(std::move(group)), rank_(rank) {}
    int rank() const override { return rank_; }
    int size() const override { return group_->size(); }
    const char* backend() const override { return "cpu"; }
    void abort(const std::string& reason) override { group_->abort_state()->abort(reason); }
    bool aborted() const override { return group_->abort_state()->aborted; }

protected:
    Status check_placement(const Context& ctx, const char* op, const Tensor&) const override {
        if (!ctx.device.is_cpu())
            return invalid_argument(std::string(op) + ": the CPU communicator runs on the CPU context, got " +
                                    ctx.device.to_string());
        return ok_status();
    }

    Status do_all_reduce_sum(const Context&, Tensor& x) override {
        std::vector<uint8_t> sum;
        const int64_t n = x.numel();
        const DType dt = x.dtype();
        return group_->run(
            rank_, {.op = "all_reduce_sum", .dtype = dt, .numel = n, .send = x.data(), .recv = x.data()},
            [&](int, const std::vector<Rendezvous::Post>& posts) {
                reduce_into(dt, n, posts, sum);
                return ok_status();
            },
            [&] { std::memcpy(x.data(), sum.data(), sum.size()); });
    }

    Status do_all_to_all(const Context&, const Tensor& send, Tensor& recv) override {
        const int n = size();
        const size_t chunk = send.nbytes() / static_cast<size_t>(n);
        return group_->run(
            rank_,
            {.op = "all_to_all",
             .dtype = send.dtype(),
             .numel = send.numel(),
             .send = send.data(),
             .recv = recv.data()},
            [&](int r, const std::vector<Rendezvous::Post>& posts) {
                for (int j = 0; j < n; ++j)
                    std::memcpy(static_cast<uint8_t*>(recv.data()) + chunk * j,
                                static_cast<const uint8_t*>(posts[j].send) + chunk * r, chunk);
                return ok_status();
            },
            nullptr);
    }

    Status do_all_gather(const Context&, const Tensor& send, Tensor& recv) override {
        const int n = size();
        const size_t bytes = send.nbytes();
        return group_->run(
            rank_,
            {.op = "all_gather",
             .dtype = send.dtype(),
             .numel = send.numel(),
             .send = send.data(),
             .recv = recv.data()},
            [&](int, const std::vector<Rendezvous::Post>& posts) {
                for (int j = 0; j < n; ++j)
                    std::memcpy(static_cast<uint8_t*>(recv.data()) + bytes * j, posts[j].send, bytes);
                return ok_status();
            },
            nullptr);
    }

    Status do_broadcast(const Context&, Tensor& x, int root) override {
        return group_->run(
            rank_,
            {.op = "broadcast",
             .dtype = x.dtype(),
             .numel = x.numel(),
             .root = root,
             .send = x.data(),
             .recv = x.data()},
            [&](int r, const std::vector<Rendezvous::Post>& posts) {
                if (r != root) std::memcpy(x.data(), posts[root].send, x.nbytes());
                return ok_status();
            },
            nullptr);
    }

    Status do_barrier(const Context&) override {
        return group_->run(
            rank_, {.op = "barrier"}, [](int, const std::vector<Rendezvous::Post>&) { return ok_status(); },
            nullptr);
    }

private:
    std::shared_ptr<Rendezvous> group_;
    int rank_;
};

class CpuGroup final : public CpuCommGroup, public std::enable_shared_from_this<CpuGroup> {
public:
    CpuGroup(int size, const CommOptions& options, std::shared_ptr<AbortState> abort)
        : options_(options), rendezvous_(std::make_shared<Rendezvous>(size, options, abort)) {
        std::lock_guard<std::mutex> lk(abort->m);
        abort->groups.push_back(rendezvous_);
    }
    int size() const override { return rendezvous_->size(); }
    std::unique_ptr<Communicator> communicator(int rank) override {
        H3_CHECK(rank >= 0 && rank < size(), "rank " << rank << " of a group of " << size());
        return std::make_unique<CpuCommunicator>(rendezvous_, rank);
    }
    std::shared_ptr<CpuCommGroup> subgroup(const std::vector<int>& members) override {
        for (int m : members) H3_CHECK(m >= 0 && m < size(), "sub-group member " << m << " of " << size());
        return std::make_shared<CpuGroup>(static_cast<int>(members.size()), options_,
                                          rendezvous_->abort_state());
    }
    void abort(const std::string& reason) override { rendezvous_->abort_state()->abort(reason); }

private:
    CommOptions options_;
    std::shared_ptr<Rendezvous> rendezvous_;
};

} // namespace

std::shared_ptr<CpuCommGroup> CpuCommGroup::create(int size, const CommOptions& options) {
    H3_CHECK(size >= 1, "a communicator group needs at least one rank, got " << size);
    return std::make_shared<CpuGroup>(size, options, std::make_shared<AbortState>());
}

} // namespace h3::ops
