// Processes over TCP (ops/communicator.h make_tcp_communicator): a star through rank 0. Each collective:
// every peer sends a header (op, dtype, count, root) and its payload; rank 0 checks the headers against its
// own, computes the result in rank order (the in-process backend's arithmetic) and sends each peer its part.
// Every socket read and write waits at most the timeout; any failure closes the connections, so the other
// ranks fail at their next read instead of hanging.
#include "core/dtype.h"
#include "ops/cancel.h"
#include "ops/communicator.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace h3::ops {

namespace {

using Clock = std::chrono::steady_clock;

struct Header {
    int32_t op = 0, dtype = 0, root = 0, status = 0; // status: 0 ok, 1 the sender failed
    int64_t numel = 0, bytes = 0;
};

enum Op : int32_t { kAllReduce = 1, kAllToAll, kAllGather, kBroadcast, kBarrier };

const char* op_name(int32_t op) {
    switch (op) {
    case kAllReduce:
        return "all_reduce_sum";
    case kAllToAll:
        return "all_to_all";
    case kAllGather:
        return "all_gather";
    case kBroadcast:
        return "broadcast";
    case kBarrier:
        return "barrier";
    }
    return "?";
}

class Socket {
public:
    explicit Socket(int fd = -1) : fd_(fd) {}
    Socket(Socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
    Socket& operator=(Socket&& o) noexcept {
        close();
        fd_ = o.fd_;
        o.fd_ = -1;
        return *this;
    }
    ~Socket() { close(); }
    void close() {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }
    int fd() const { return fd_; }
    bool open() const { return fd_ >= 0; }

    Status send_all(const void* data, size_t n, std::chrono::milliseconds timeout) {
        const auto* p = static_cast<const uint8_t*>(data);
        const auto deadline = Clock::now() + timeout;
        while (n > 0) {
            H3_TRY(wait(POLLOUT, deadline));
            const ssize_t k = ::send(fd_, p, n, MSG_NOSIGNAL);
            if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            if (k <= 0) return internal_error(std::string("TCP send: ") + std::strerror(errno));
            p += k;
            n -= static_cast<size_t>(k);
        }
        return ok_status();
    }
    Status recv_all(void* data, size_t n, std::chrono::milliseconds timeout) {
        auto* p = static_cast<uint8_t*>(data);
        const auto deadline = Clock::now() + timeout;
        while (n > 0) {
            H3_TRY(wait(POLLIN, deadline));
            const ssize_t k = ::recv(fd_, p, n, 0);
            if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            if (k == 0) return internal_error("TCP: the peer closed the connection");
            if (k < 0) return internal_error(std::string("TCP recv: ") + std::strerror(errno));
            p += k;
            n -= static_cast<size_t>(k);
        }
        return ok_status();
    }

private:
    Status wait(short events, Clock::time_point deadline) {
        for (;;) {
            if (fd_ < 0) return internal_error("TCP: the connection was closed (the group was aborted)");
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
            if (left.count() <= 0) return internal_error("TCP: timed out");
            if (cancel_requested()) return cancelled("TCP: the job was cancelled while waiting for a peer");
            pollfd pfd{fd_, events, 0};
            const int r = ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left.count(), 200)));
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) return internal_error(std::string("TCP poll: ") + std::strerror(errno));
            if (r > 0) return ok_status();
        }
    }
    int fd_;
};

Result<sockaddr_in> resolve(const std::string& addr, int port) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (getaddrinfo(addr.c_str(), nullptr, &hints, &res) != 0 || !res)
        return invalid_argument("MASTER_ADDR '" + addr + "' does not resolve to an IPv4 address");
    sockaddr_in a = *reinterpret_cast<sockaddr_in*>(res->ai_addr);
    freeaddrinfo(res);
    a.sin_port = htons(static_cast<uint16_t>(port));
    return a;
}

void tune(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

class TcpCommunicator final : public Communicator {
public:
    TcpCommunicator(int rank, int size, CommOptions options, std::vector<Socket> peers)
        : rank_(rank), size_(size), options_(options), peers_(std::move(peers)) {}
    int rank() const override { return rank_; }
    int size() const override { return size_; }
    const char* backend() const override { return "tcp"; }

    // The IPv4 address (network order) this rank's peers reach it by: the local end of its connection to
    // rank 0 (rank 0: of its connection to rank 1); 0 for a group of one.
    uint32_t local_address() const {
        const Socket& s = rank_ == 0 ? peers_[size_ > 1 ? 1 : 0] : peers_[0];
        if (!s.open()) return 0;
        sockaddr_in a{};
        socklen_t len = sizeof a;
        if (::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&a), &len) != 0) return 0;
        return a.sin_addr.s_addr;
    }

    void abort(const std::string& reason) override {
        std::lock_guard<std::mutex> lk(m_);
        if (aborted_) return;
        aborted_ = true;
        reason_ = reason;
        for (auto& s : peers_) s.close();
    }
    bool aborted() const override { return aborted_; }

protected:
    Status check_placement(const Context& ctx, const char* op, const Tensor&) const override {
        if (!ctx.device.is_cpu())
            return invalid_argument(std::string(op) + ": the TCP communicator runs on the CPU context, got " +
                                    ctx.device.to_string());
        return ok_status();
    }
    Status do_all_reduce_sum(const Context&, Tensor& x) override { return collective(kAllReduce, x, x, 0); }
    Status do_all_to_all(const Context&, const Tensor& send, Tensor& recv) override {
        return collective(kAllToAll, send, recv, 0);
    }
    Status do_all_gather(const Context&, const Tensor& send, Tensor& recv) override {
        return collective(kAllGather, send, recv, 0);
    }
    Status do_broadcast(const Context&, Tensor& x, int root) override {
        return collective(kBroadcast, x, x, root);
    }
    Status do_barrier(const Context&) override {
        Tensor none = Tensor::host(Shape{0}, DType::kF32);
        return collective(kBarrier, none, none, 0);
    }

private:
    Status fail(const Status& s) {
        abort(s.message());
        return s;
    }
    Status failed_status(const char* op) {
        std::lock_guard<std::mutex> lk(m_);
        return internal_error(std::string("communicator ") + op + " on rank " + std::to_string(rank_) +
                              ": the group was aborted (" + reason_ + ")");
    }

    Status collective(int32_t op, const Tensor& send, Tensor& recv, int root) {
        if (aborted_) return failed_status(op_name(op));
        Header mine{.op = op,
                    .dtype = static_cast<int32_t>(send.dtype()),
                    .root = root,
                    .numel = send.numel(),
                    .bytes = static_cast<int64_t>(send.nbytes())};
        const bool sends_payload = op != kBarrier && (op != kBroadcast || rank_ == root);
        const auto t = options_.timeout;
        const std::string where = std::string(op_name(op)) + " on rank " + std::to_string(rank_);
        if (rank_ != 0) { // a peer: header + payload to rank 0, the result back
            Socket& hub = peers_[0];
            Status s = hub.send_all(&mine, sizeof mine, t);
            if (s.ok() && sends_payload) s = hub.send_all(send.data(), send.nbytes(), t);
            Header reply;
            if (s.ok()) s = hub.recv_all(&reply, sizeof reply, t);
            if (s.ok() && reply.status != 0)
                s = internal_error("rank 0 reported a mismatched or failed collective");
            if (s.ok() && reply.bytes > 0) {
                if (static_cast<size_t>(reply.bytes) != recv.nbytes())
                    s = internal_error("rank 0 sent " + std::to_string(reply.bytes) + " bytes for " +
                                       recv.describe());
                else
                    s = hub.recv_all(recv.data(), recv.nbytes(), t);
            }
            if (!s.ok()) return fail(s.with_context("communicator " + where));
            return ok_status();
        }
        // rank 0: every peer's header and payload, in rank order
        const size_t bytes = send.nbytes();
        std::vector<std::vector<uint8_t>> payload(static_cast<size_t>(size_));
        payload[0].assign(static_cast<const uint8_t*>(send.data()),
                          static_cast<const uint8_t*>(send.data()) + bytes);
        Status bad = ok_status();
        for (int r = 1; r < size_; ++r) {
            Header h;
            Status s = peers_[static_cast<size_t>(r)].recv_all(&h, sizeof h, t);
            if (!s.ok())
                return fail(
                    s.with_context("communicator " + where + " waiting for rank " + std::to_string(r)));
            if (h.op != mine.op || h.dtype != mine.dtype || h.numel != mine.numel || h.root != mine.root)
                bad = internal_error(std::string("communicator: rank ") + std::to_string(r) + " called " +
                                     op_name(h.op) + " on " + std::to_string(h.numel) +
                                     " elements while rank 0 called " + op_name(op) + " on " +
                                     std::to_string(mine.numel) + " (the ranks' collectives must match)");
            const bool payload_r = op != kBarrier && (op != kBroadcast || r == root);
            if (payload_r && bad.ok()) {
                payload[static_cast<size_t>(r)].resize(bytes);
                s = peers_[static_cast<size_t>(r)].recv_all(payload[static_cast<size_t>(r)].data(), bytes, t);
                if (!s.ok())
                    return fail(
                        s.with_context("communicator " + where + " reading rank " + std::to_string(r)));
            }
        }
        if (!bad.ok()) {
            Header reply{.status = 1};
            for (int r = 1; r < size_; ++r)
                (void)peers_[static_cast<size_t>(r)].send_all(&reply, sizeof reply, t);
            return fail(bad);
        }
        const DType dt = send.dtype();
        const int64_t n = send.numel();
        auto reply_to = [&](int r, const void* data, size_t nb) -> Status {
            Header h{.op = op, .bytes = static_cast<int64_t>(nb)};
            H3_TRY(peers_[static_cast<size_t>(r)].send_all(&h, sizeof h, t));
            return nb ? peers_[static_cast<size_t>(r)].send_all(data, nb, t) : ok_status();
        };
        Status s = ok_status();
        if (op == kAllReduce) { // rank order, fp32 (f64) accumulation, one rounding
            std::vector<uint8_t> sum(bytes);
            for (int64_t i = 0; i < n; ++i) {
                if (dt == DType::kF64) {
                    double a = 0;
                    for (const auto& p : payload) a += reinterpret_cast<const double*>(p.data())[i];
                    reinterpret_cast<double*>(sum.data())[i] = a;
                } else if (dt == DType::kF32) {
                    float a = 0;
                    for (const auto& p : payload) a += reinterpret_cast<const float*>(p.data())[i];
                    reinterpret_cast<float*>(sum.data())[i] = a;
                } else {
                    float a = 0;
                    for (const auto& p : payload)
                        a += bf16_to_f32(reinterpret_cast<const uint16_t*>(p.data())[i]);
                    reinterpret_cast<uint16_t*>(sum.data())[i] = f32_to_bf16(a);
                }
            }
            for (int r = 1; r < size_ && s.ok(); ++r) s = reply_to(r, sum.data(), bytes);
            std::memcpy(recv.data(), sum.data(), bytes);
        } else if (op == kAllToAll) {
            const size_t chunk = bytes / static_cast<size_t>(size_);
            std::vector<uint8_t> out(bytes);
            for (int j = 0; j < size_ && s.ok(); ++j) {
                for (int i = 0; i < size_; ++i)
                    std::memcpy(out.data() + chunk * i, payload[static_cast<size_t>(i)].data() + chunk * j,
                                chunk);
                if (j == 0)
                    std::memcpy(recv.data(), out.data(), bytes);
                else
                    s = reply_to(j, out.data(), bytes);
            }
        } else if (op == kAllGather) {
            std::vector<uint8_t> all(bytes * static_cast<size_t>(size_));
            for (int i = 0; i < size_; ++i)
                std::memcpy(all.data() + bytes * i, payload[static_cast<size_t>(i)].data(), bytes);
            for (int r = 1; r < size_ && s.ok(); ++r) s = reply_to(r, all.data(), all.size());
            std::memcpy(recv.data(), all.data(), all.size());
        } else if (op == kBroadcast) {
            const auto& src = payload[static_cast<size_t>(root)];
            for (int r = 1; r < size_ && s.ok(); ++r)
                s = reply_to(r, r == root ? nullptr : src.data(), r == root ? 0 : bytes);
            if (root != 0) std::memcpy(recv.data(), src.data(), bytes);
        } else {
            for (int r = 1; r < size_ && s.ok(); ++r) s = reply_to(r, nullptr, 0);
        }
        if (!s.ok()) return fail(s.with_context("communicator " + where));
        return ok_status();
    }

    int rank_, size_;
    CommOptions options_;
    std::vector<Socket> peers_; // rank 0: one per rank (index 0 unused); others: [0] = rank 0
    std::atomic<bool> aborted_{false};
    std::mutex m_;
    std::string reason_;
};

} // namespace

namespace {

// Rank 0's side of a rendezvous: `size` − 1 ranks connect to `listener`, each says (rank, size) and gets
// `id`; `where` names the address in messages. peers[r] is rank r's connection.
Status accept_peers(Socket& listener, int size, const std::array<char, 128>& id, const CommOptions& options,
                    Clock::time_point deadline, const std::string& where, std::vector<Socket>& peers) {
    if (::listen(listener.fd(), size) != 0) return io_error(std::string("listen: ") + std::strerror(errno));
    for (int joined = 1; joined < size;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0)
            return internal_error("rank 0: only " + std::to_string(joined - 1) + " of " +
                                  std::to_string(size - 1) + " ranks connected to " + where +
                                  " within the timeout");
        pollfd pfd{listener.fd(), POLLIN, 0};
        if (::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left.count(), 200))) <= 0) continue;
        Socket c(::accept(listener.fd(), nullptr, nullptr));
        if (!c.open()) continue;
        tune(c.fd());
        int32_t hello[2] = {0, 0}; // rank, world
        if (!c.recv_all(hello, sizeof hello, options.timeout).ok()) continue;
        if (hello[1] != size || hello[0] <= 0 || hello[0] >= size ||
            peers[static_cast<size_t>(hello[0])].open())
            return invalid_argument("a process joined as rank " + std::to_string(hello[0]) + " of " +
                                    std::to_string(hello[1]) + ", expected a new rank of WORLD_SIZE " +
                                    std::to_string(size));
        H3_TRY(c.send_all(id.data(), id.size(), options.timeout));
        peers[static_cast<size_t>(hello[0])] = std::move(c);
        ++joined;
    }
    return ok_status();
}

// A rank's side: connect to rank 0 at `addr` (retrying until the deadline), say (rank, size), get the id.
Result<Socket> connect_hub(const sockaddr_in& addr, int rank, int size, std::array<char, 128>& id,
                           const CommOptions& options, Clock::time_point deadline, const std::string& where) {
    for (;;) {
        Socket c(::socket(AF_INET, SOCK_STREAM, 0));
        if (::connect(c.fd(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) {
            tune(c.fd());
            const int32_t hello[2] = {rank, size};
            H3_TRY(c.send_all(hello, sizeof hello, options.timeout));
            H3_TRY(c.recv_all(id.data(), id.size(), options.timeout));
            return c;
        }
        if (Clock::now() > deadline)
            return internal_error("rank " + std::to_string(rank) + " could not reach rank 0 at " + where +
                                  " within the timeout");
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
}

std::string address_text(const sockaddr_in& a) {
    char buf[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &a.sin_addr, buf, sizeof buf);
    return std::string(buf) + ":" + std::to_string(ntohs(a.sin_port));
}

} // namespace

Result<std::unique_ptr<Communicator>>
make_tcp_communicator(const TcpRendezvous& w, const CommOptions& options, std::array<char, 128>* blob) {
    if (w.size < 1 || w.rank < 0 || w.rank >= w.size)
        return invalid_argument("RANK " + std::to_string(w.rank) + " must lie in [0, WORLD_SIZE " +
                                std::to_string(w.size) + ")");
    if (w.port < 1 || w.port > 65535)
        return invalid_argument("MASTER_PORT " + std::to_string(w.port) + " must lie in [1, 65535]");
    H3_ASSIGN_OR_RETURN(sockaddr_in addr, resolve(w.addr, w.port));
    std::array<char, 128> none{};
    std::array<char, 128>& id = blob ? *blob : none;
    const auto deadline = Clock::now() + options.timeout;
    const std::string where = w.addr + ":" + std::to_string(w.port);
    std::vector<Socket> peers(static_cast<size_t>(w.rank == 0 ? w.size : 1));
    if (w.rank == 0) {
        Socket listener(::socket(AF_INET, SOCK_STREAM, 0));
        int one = 1;
        setsockopt(listener.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (::bind(listener.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
            return io_error("rank 0 cannot listen on MASTER_ADDR:MASTER_PORT " + where + ": " +
                            std::strerror(errno));
        H3_TRY(accept_peers(listener, w.size, id, options, deadline, where, peers));
    } else {
        H3_ASSIGN_OR_RETURN(peers[0], connect_hub(addr, w.rank, w.size, id, options, deadline, where));
    }
    return std::unique_ptr<Communicator>(
        std::make_unique<TcpCommunicator>(w.rank, w.size, options, std::move(peers)));
}

Result<std::unique_ptr<Communicator>> split_tcp_communicator(Communicator& parent, int color, int key,
                                                             const CommOptions& options) {
    auto* tcp = dynamic_cast<TcpCommunicator*>(&parent);
    if (!tcp)
        return invalid_argument(std::string("split_tcp_communicator: the parent is a ") + parent.backend() +
                                " communicator, not a TCP one");
    const Context cpu = Context::cpu();
    const int n = parent.size(), me = parent.rank();
    // 1. Every rank's (color, key): the members of this rank's color, ordered by (key, parent rank).
    Tensor mine = Tensor::host(Shape{2}, DType::kI32), all = Tensor::host(Shape{2 * n}, DType::kI32);
    mine.data_as<int32_t>()[0] = color;
    mine.data_as<int32_t>()[1] = key;
    H3_TRY(parent.all_gather(cpu, mine, all));
    const int32_t* ck = all.data_as<const int32_t>();
    std::vector<std::pair<int32_t, int>> members; // (key, parent rank)
    for (int r = 0; r < n; ++r)
        if (ck[2 * r] == color) members.push_back({ck[2 * r + 1], r});
    std::sort(members.begin(), members.end());
    const int size = static_cast<int>(members.size());
    int rank = 0;
    while (members[static_cast<size_t>(rank)].second != me) ++rank;
    // 2. The sub-group's first member listens on an ephemeral port of the address its peers reach it by.
    Socket listener;
    sockaddr_in here{};
    if (rank == 0 && size > 1) {
        here.sin_family = AF_INET;
        here.sin_addr.s_addr = tcp->local_address();
        if (here.sin_addr.s_addr == 0) here.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        listener = Socket(::socket(AF_INET, SOCK_STREAM, 0));
        socklen_t len = sizeof here;
        if (::bind(listener.fd(), reinterpret_cast<sockaddr*>(&here), sizeof here) != 0 ||
            ::getsockname(listener.fd(), reinterpret_cast<sockaddr*>(&here), &len) != 0 ||
            ::listen(listener.fd(), size) != 0)
            return io_error("rank " + std::to_string(me) +
                            " cannot listen for its TCP sub-group: " + std::strerror(errno));
    }
    // 3. Every rank's listening address (0 where none), then the members meet their first member.
    Tensor addr_mine = Tensor::host(Shape{2}, DType::kI32), addrs = Tensor::host(Shape{2 * n}, DType::kI32);
    addr_mine.data_as<int32_t>()[0] = static_cast<int32_t>(here.sin_addr.s_addr);
    addr_mine.data_as<int32_t>()[1] = static_cast<int32_t>(ntohs(here.sin_port));
    H3_TRY(parent.all_gather(cpu, addr_mine, addrs));
    const auto deadline = Clock::now() + options.timeout;
    std::array<char, 128> id{};
    std::vector<Socket> peers(static_cast<size_t>(rank == 0 ? size : 1));
    if (size > 1) {
        const int root = members[0].second;
        sockaddr_in there{};
        there.sin_family = AF_INET;
        there.sin_addr.s_addr = static_cast<uint32_t>(addrs.data_as<const int32_t>()[2 * root]);
        there.sin_port = htons(static_cast<uint16_t>(addrs.data_as<const int32_t>()[2 * root + 1]));
        const std::string where = "sub-group " + std::to_string(color) + " at " + address_text(there);
        if (rank == 0) {
            H3_TRY(accept_peers(listener, size, id, options, deadline, where, peers));
        } else {
            H3_ASSIGN_OR_RETURN(peers[0], connect_hub(there, rank, size, id, options, deadline, where));
        }
    }
    return std::unique_ptr<Communicator>(
        std::make_unique<TcpCommunicator>(rank, size, options, std::move(peers)));
}

} // namespace h3::ops
