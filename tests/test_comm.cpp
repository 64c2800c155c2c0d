// ops::Communicator: the in-process CPU backend on 2, 4 and 8 ranks (every collective against a serial
// computation, the fixed reduction order, bf16 / f64, sub-groups, mismatched calls, timeouts and abort), and
// NCCL at world size 1 where a CUDA device is present (the device check runs it; skipped elsewhere).
#include "core/dtype.h"
#include "ops/communicator.h"
#include "runtime/device_session.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

using namespace h3;
using namespace std::chrono_literals;

namespace {

// Runs fn(rank, comm) on one thread per rank; returns each rank's status.
std::vector<Status> spmd(ops::CpuCommGroup& group, const std::function<Status(int, ops::Communicator&)>& fn) {
    const int n = group.size();
    std::vector<std::unique_ptr<ops::Communicator>> comms;
    for (int r = 0; r < n; ++r) comms.push_back(group.communicator(r));
    std::vector<Status> st(static_cast<size_t>(n));
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
        threads.emplace_back([&, r] { st[static_cast<size_t>(r)] = fn(r, *comms[static_cast<size_t>(r)]); });
    for (auto& t : threads) t.join();
    return st;
}

// A value no two (rank, index) pairs share, with fractions that make the summation order visible in fp32.
float value(int rank, int64_t i) {
    return static_cast<float>((rank + 1) * 0.1 + static_cast<double>(i) * 1e-3 + (rank % 2 ? 1e7 : 0));
}

Tensor filled(int rank, int64_t n) {
    Tensor t = Tensor::host(Shape{n}, DType::kF32);
    for (int64_t i = 0; i < n; ++i) t.data_as<float>()[i] = value(rank, i);
    return t;
}

class CommRanks : public ::testing::TestWithParam<int> {};

TEST_P(CommRanks, AllReduceSumsInRankOrderOnEveryRank) {
    const int n = GetParam();
    auto group = ops::CpuCommGroup::create(n);
    const int64_t len = 37;
    std::vector<std::vector<float>> got(static_cast<size_t>(n));
    auto st = spmd(*group, [&](int r, ops::Communicator& c) -> Status {
        EXPECT_EQ(c.rank(), r);
        EXPECT_EQ(c.size(), n);
        Tensor x = filled(r, len);
        H3_TRY(c.all_reduce_sum(ops::Context::cpu(), x));
        got[static_cast<size_t>(r)].assign(x.data_as<float>(), x.data_as<float>() + len);
        return ok_status();
    });
    for (const auto& s : st) ASSERT_TRUE(s.ok()) << s.to_string();
    for (int64_t i = 0; i < len; ++i) {
        float expect = 0;
        for (int r = 0; r < n; ++r) expect += value(r, i); // rank order, fp32
        for (int r = 0; r < n; ++r) {
            uint32_t a, b;
            std::memcpy(&a, &got[static_cast<size_t>(r)][static_cast<size_t>(i)], 4);
            std::memcpy(&b, &expect, 4);
            ASSERT_EQ(a, b) << "rank " << r << " element " << i;
        }
    }
}

TEST_P(CommRanks, AllReduceBf16AndF64) {
    const int n = GetParam();
    auto group = ops::CpuCommGroup::create(n);
    auto st = spmd(*group, [&](int r, ops::Communicator& c) -> Status {
        Tensor b = Tensor::host(Shape{4}, DType::kBF16);
        for (int i = 0; i < 4; ++i) b.data_as<uint16_t>()[i] = f32_to_bf16(static_cast<float>(r + i));
        H3_TRY(c.all_reduce_sum(ops::Context::cpu(), b));
        Tensor d = Tensor::host(Shape{2}, DType::kF64);
        d.data_as<double>()[0] = 1e-17 * (r + 1);
        d.data_as<double>()[1] = r;
        H3_TRY(c.all_reduce_sum(ops::Context::cpu(), d));
        for (int i = 0; i < 4; ++i) {
            float e = 0;
            for (int k = 0; k < n; ++k) e += static_cast<float>(k + i);
            EXPECT_EQ(bf16_to_f32(b.data_as<uint16_t>()[i]), round_bf16(e));
        }
        double e0 = 0;
        for (int k = 0; k < n; ++k) e0 += 1e-17 * (k + 1);
        EXPECT_EQ(d.data_as<double>()[0], e0);
        EXPECT_EQ(d.data_as<double>()[1], n * (n - 1) / 2.0);
        return ok_status();
    });
    for (const auto& s : st) ASSERT_TRUE(s.ok()) << s.to_string();
}

// all_to_all (send[j·chunk + e] = 1000·r + 10·j + e → recv[j·chunk + e] = 1000·j + 10·r + e), all_gather
// and a broadcast from the last rank, as rank r of n sees them; every backend's test runs these checks.
Status check_exchanges(ops::Communicator& c, const ops::Context& ctx, int r, int n, int64_t chunk) {
    Tensor send = Tensor::host(Shape{n * chunk}, DType::kF32),
           recv = Tensor::host(Shape{n * chunk}, DType::kF32);
    for (int j = 0; j < n; ++j)
        for (int e = 0; e < chunk; ++e) send.data_as<float>()[j * chunk + e] = 1000.f * r + 10.f * j + e;
    H3_TRY(c.all_to_all(ctx, send, recv));
    for (int j = 0; j < n; ++j)
        for (int e = 0; e < chunk; ++e)
            EXPECT_EQ(recv.data_as<float>()[j * chunk + e], 1000.f * j + 10.f * r + e) << r << " " << j;
    Tensor mine = filled(r, chunk), all = Tensor::host(Shape{n * chunk}, DType::kF32);
    H3_TRY(c.all_gather(ctx, mine, all));
    for (int j = 0; j < n; ++j)
        for (int e = 0; e < chunk; ++e) EXPECT_EQ(all.data_as<float>()[j * chunk + e], value(j, e));
    Tensor b = filled(r, chunk);
    H3_TRY(c.broadcast(ctx, b, n - 1));
    for (int e = 0; e < chunk; ++e) EXPECT_EQ(b.data_as<float>()[e], value(n - 1, e));
    return ok_status();
}

TEST_P(CommRanks, AllToAllAllGatherBroadcastBarrier) {
    const int n = GetParam();
    auto group = ops::CpuCommGroup::create(n);
    const int64_t chunk = 5;
    auto st = spmd(*group, [&](int r, ops::Communicator& c) -> Status {
        const ops::Context ctx = ops::Context::cpu();
        H3_TRY(check_exchanges(c, ctx, r, n, chunk));
        return c.barrier(ctx);
    });
    for (const auto& s : st) ASSERT_TRUE(s.ok()) << s.to_string();
}

TEST_P(CommRanks, SubgroupsCollectIndependently) {
    const int n = GetParam();
    auto group = ops::CpuCommGroup::create(n);
    // Two sub-groups: even and odd ranks.
    std::vector<int> even, odd;
    for (int r = 0; r < n; ++r) (r % 2 ? odd : even).push_back(r);
    auto ge = group->subgroup(even), go = group->subgroup(odd);
    std::vector<std::unique_ptr<ops::Communicator>> sub(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) sub[static_cast<size_t>(r)] = (r % 2 ? go : ge)->communicator(r / 2);
    auto st = spmd(*group, [&](int r, ops::Communicator& world) -> Status {
        Tensor x = Tensor::host(Shape{1}, DType::kF32);
        x.data_as<float>()[0] = static_cast<float>(r);
        H3_TRY(sub[static_cast<size_t>(r)]->all_reduce_sum(ops::Context::cpu(), x));
        float e = 0;
        for (int k = r % 2; k < n; k += 2) e += static_cast<float>(k);
        EXPECT_EQ(x.data_as<float>()[0], e);
        return world.barrier(ops::Context::cpu());
    });
    for (const auto& s : st) ASSERT_TRUE(s.ok()) << s.to_string();
}

INSTANTIATE_TEST_SUITE_P(Ranks, CommRanks, ::testing::Values(2, 4, 8));

TEST(Comm, MismatchedCollectivesFailOnEveryRank) {
    auto group = ops::CpuCommGroup::create(2);
    auto st = spmd(*group, [&](int r, ops::Communicator& c) -> Status {
        Tensor x = filled(r, r == 0 ? 4 : 5);
        return c.all_reduce_sum(ops::Context::cpu(), x);
    });
    for (const auto& s : st) EXPECT_FALSE(s.ok());
    EXPECT_NE(st[1].message().find("must match"), std::string::npos) << st[1].message();
}

TEST(Comm, TimeoutAbortsTheGroupAndNamesTheLateRank) {
    auto group = ops::CpuCommGroup::create(3, {.timeout = 200ms});
    const auto t0 = std::chrono::steady_clock::now();
    auto st = spmd(*group, [&](int r, ops::Communicator& c) -> Status {
        if (r == 2) { // stuck in compute past the timeout, then tries its next collective
            std::this_thread::sleep_for(600ms);
            return c.barrier(ops::Context::cpu());
        }
        return c.barrier(ops::Context::cpu());
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const auto& x : st) EXPECT_FALSE(x.ok());
    EXPECT_NE(st[0].message().find("rank(s) 2"), std::string::npos) << st[0].message();
    EXPECT_NE(st[2].message().find("aborted"), std::string::npos) << st[2].message();
    EXPECT_LT(s, 5.0);
}

TEST(Comm, AbortWakesWaitersInEverySubgroup) {
    auto group = ops::CpuCommGroup::create(4, {.timeout = 60s});
    auto pair = group->subgroup({0, 1});
    std::vector<std::unique_ptr<ops::Communicator>> sub;
    sub.push_back(pair->communicator(0));
    sub.push_back(pair->communicator(1));
    const auto t0 = std::chrono::steady_clock::now();
    auto st = spmd(*group, [&](int r, ops::Communicator& c) -> Status {
        if (r == 3) { // fails and tells the group
            std::this_thread::sleep_for(100ms);
            c.abort("rank 3 threw: injected failure");
            return internal_error("injected");
        }
        if (r == 0) { // waits in the sub-group for rank 1, which waits in the world
            Tensor x = filled(r, 3);
            return sub[0]->all_reduce_sum(ops::Context::cpu(), x);
        }
        return c.barrier(ops::Context::cpu());
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const auto& x : st) EXPECT_FALSE(x.ok());
    EXPECT_NE(st[0].message().find("rank 3 threw"), std::string::npos) << st[0].message();
    EXPECT_LT(s, 5.0); // far below the 60 s timeout
    EXPECT_TRUE(sub[1]->aborted());
    // Later collectives fail at once.
    Tensor x = filled(0, 1);
    EXPECT_FALSE(sub[0]->all_reduce_sum(ops::Context::cpu(), x).ok());
}

TEST(Comm, RejectsWhatItCannotSum) {
    auto group = ops::CpuCommGroup::create(1);
    auto c = group->communicator(0);
    Tensor i = Tensor::host(Shape{2}, DType::kI32);
    const Status s = c->all_reduce_sum(ops::Context::cpu(), i);
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(s.message().find("f32, bf16 or f64"), std::string::npos) << s.message();
}

// NCCL with one rank on the first CUDA device: every collective moves the data it must (the device check).
TEST(CommNccl, WorldSizeOne) {
    if (!ops::nccl_available()) {
        auto id = ops::nccl_unique_id();
        ASSERT_FALSE(id.ok());
        EXPECT_NE(id.status().message().find("NCCL is not built in"), std::string::npos);
        GTEST_SKIP() << "built without NCCL";
    }
    auto session = runtime::DeviceSession::open("cuda:0");
    if (!session.ok()) GTEST_SKIP() << "no CUDA device: " << session.status().to_string();
    const ops::Context& ctx = (*session)->context();
    auto id = ops::nccl_unique_id();
    ASSERT_TRUE(id.ok()) << id.status().to_string();
    auto comm = ops::make_nccl_communicator(*id, 0, 1, 0);
    ASSERT_TRUE(comm.ok()) << comm.status().to_string();
    Tensor host = filled(0, 8);
    auto dev = host.to(ctx.device, ctx.stream());
    ASSERT_TRUE(dev.ok());
    Tensor x = *dev;
    ASSERT_TRUE((*comm)->all_reduce_sum(ctx, x).ok());
    auto recv = Tensor::empty(Shape{8}, DType::kF32, ctx.device);
    ASSERT_TRUE(recv.ok());
    Tensor r = *recv;
    ASSERT_TRUE((*comm)->all_to_all(ctx, x, r).ok());
    ASSERT_TRUE((*comm)->all_gather(ctx, x, r).ok());
    ASSERT_TRUE((*comm)->broadcast(ctx, r, 0).ok());
    ASSERT_TRUE((*comm)->barrier(ctx).ok());
    auto back = r.to(Device::cpu(), ctx.stream());
    ASSERT_TRUE(back.ok());
    for (int i = 0; i < 8; ++i) EXPECT_EQ(back->data_as<float>()[i], value(0, i));
    EXPECT_STREQ(getenv("NCCL_NVLS_ENABLE"), "0");
}

} // namespace

namespace {

int free_port() { // a port the kernel just handed out (bound and released)
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t n = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
    const int port = ntohs(a.sin_port);
    ::close(fd);
    return port;
}

// Runs fn on `n` TCP ranks (threads standing in for processes) over 127.0.0.1.
std::vector<Status> tcp_spmd(int n, const ops::CommOptions& o,
                             const std::function<Status(int, ops::Communicator&)>& fn) {
    const int port = free_port();
    std::vector<Status> st(static_cast<size_t>(n));
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
        threads.emplace_back([&, r] {
            std::array<char, 128> blob{};
            if (r == 0) std::snprintf(blob.data(), blob.size(), "nccl id of rank 0");
            auto c = ops::make_tcp_communicator({.addr = "127.0.0.1", .port = port, .rank = r, .size = n}, o,
                                                &blob);
            if (!c.ok()) {
                st[static_cast<size_t>(r)] = c.status();
                return;
            }
            EXPECT_STREQ(blob.data(), "nccl id of rank 0"); // the bootstrap carried rank 0's id
            st[static_cast<size_t>(r)] = fn(r, **c);
        });
    for (auto& t : threads) t.join();
    return st;
}

} // namespace

class TcpRanks : public ::testing::TestWithParam<int> {};

// The TCP star gives the same bits as the in-process backend (sums in rank order).
TEST_P(TcpRanks, CollectivesMatchTheInProcessBackend) {
    const int n = GetParam();
    const int64_t chunk = 3, len = 11;
    auto st = tcp_spmd(n, {.timeout = 20s}, [&](int r, ops::Communicator& c) -> Status {
        const ops::Context ctx = ops::Context::cpu();
        Tensor x = filled(r, len);
        H3_TRY(c.all_reduce_sum(ctx, x));
        for (int64_t i = 0; i < len; ++i) {
            float e = 0;
            for (int k = 0; k < n; ++k) e += value(k, i);
            EXPECT_EQ(x.data_as<float>()[i], e);
        }
        H3_TRY(check_exchanges(c, ctx, r, n, chunk));
        Tensor d = Tensor::host(Shape{1}, DType::kF64);
        d.data_as<double>()[0] = r + 0.5;
        H3_TRY(c.all_reduce_sum(ctx, d));
        EXPECT_EQ(d.data_as<double>()[0], n * (n - 1) / 2.0 + 0.5 * n);
        return c.barrier(ctx);
    });
    for (const auto& s : st) ASSERT_TRUE(s.ok()) << s.to_string();
}

// Sub-groups of TCP ranks (split_tcp_communicator: the sp / ring / tp groups of launched CPU ranks): the
// members ordered by key, every collective among them only with the parent's arithmetic (sums in the
// sub-group's rank order), a split of a split, a sub-group of one, and the parent still usable after.
TEST_P(TcpRanks, SplitsCollectAmongTheirMembers) {
    const int n = GetParam();
    auto st = tcp_spmd(n, {.timeout = 20s}, [&](int r, ops::Communicator& c) -> Status {
        const ops::Context ctx = ops::Context::cpu();
        // color r % 2, key −r: the members in descending parent rank
        H3_ASSIGN_OR_RETURN(auto sub, ops::split_tcp_communicator(c, r % 2, -r, {.timeout = 20s}));
        std::vector<int> members;
        for (int k = n - 1; k >= 0; --k)
            if (k % 2 == r % 2) members.push_back(k);
        EXPECT_EQ(sub->size(), static_cast<int>(members.size()));
        EXPECT_EQ(members[static_cast<size_t>(sub->rank())], r);
        Tensor mine = Tensor::host(Shape{1}, DType::kI32);
        mine.data_as<int32_t>()[0] = r;
        Tensor all = Tensor::host(Shape{sub->size()}, DType::kI32);
        H3_TRY(sub->all_gather(ctx, mine, all));
        for (int i = 0; i < sub->size(); ++i)
            EXPECT_EQ(all.data_as<int32_t>()[i], members[static_cast<size_t>(i)]) << "member " << i;
        Tensor x = filled(r, 5);
        H3_TRY(sub->all_reduce_sum(ctx, x));
        for (int64_t i = 0; i < 5; ++i) {
            float e = 0;
            for (int k : members) e += value(k, i);
            EXPECT_EQ(x.data_as<float>()[i], e) << "element " << i;
        }
        // every member alone: a split of the split, collectives of one
        H3_ASSIGN_OR_RETURN(auto alone, ops::split_tcp_communicator(*sub, sub->rank(), 0, {.timeout = 20s}));
        EXPECT_EQ(alone->size(), 1);
        Tensor y = filled(r, 3);
        H3_TRY(alone->all_reduce_sum(ctx, y));
        EXPECT_EQ(y.data_as<float>()[2], value(r, 2));
        Tensor z = filled(r, 2);
        H3_TRY(c.all_reduce_sum(ctx, z));
        float e = 0;
        for (int k = 0; k < n; ++k) e += value(k, 1);
        EXPECT_EQ(z.data_as<float>()[1], e);
        return c.barrier(ctx);
    });
    for (const auto& s : st) ASSERT_TRUE(s.ok()) << s.to_string();
}

INSTANTIATE_TEST_SUITE_P(Ranks, TcpRanks, ::testing::Values(2, 3, 4));

TEST(Tcp, ARankThatFailsEndsTheOthersCollectives) {
    const auto t0 = std::chrono::steady_clock::now();
    auto st = tcp_spmd(3, {.timeout = 60s}, [&](int r, ops::Communicator& c) -> Status {
        if (r == 2) {
            std::this_thread::sleep_for(100ms);
            c.abort("rank 2 failed");
            return internal_error("injected");
        }
        return c.barrier(ops::Context::cpu());
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const auto& x : st) EXPECT_FALSE(x.ok());
    EXPECT_LT(s, 10.0);
}

TEST(Tcp, MismatchedCollectivesFail) {
    auto st = tcp_spmd(2, {.timeout = 20s}, [&](int r, ops::Communicator& c) -> Status {
        Tensor x = filled(r, r == 0 ? 4 : 5);
        return c.all_reduce_sum(ops::Context::cpu(), x);
    });
    for (const auto& s : st) EXPECT_FALSE(s.ok());
    EXPECT_NE(st[0].message().find("must match"), std::string::npos) << st[0].message();
}
