#include "engine/group_serving.h"

#include "engine/job_channel.h"
#include "pipeline/byte_codec.h"
#include "pipeline/group_broadcast.h"
#include "pipeline/job_input_bytes.h"

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <optional>

namespace h3 {

namespace {

enum MessageKind : uint8_t { kJobMessage = 1, kKeepAlive = 2, kStopMessage = 3 };
constexpr auto kKeepAliveEvery = std::chrono::seconds(10);

nlohmann::json progress_json(const pipeline::JobProgress& p) {
    return {{"stage", static_cast<int>(p.stage)},
            {"percent", p.percent},
            {"step", p.step},
            {"total", p.total},
            {"step_seconds", p.step_seconds},
            {"elapsed_seconds", p.elapsed_seconds},
            {"eta_seconds", p.eta_seconds},
            {"component", p.component ? p.component : ""},
            {"part", p.part ? p.part : ""}};
}

// What the front needs of a finished job: the record's metrics and the counters of its /metrics.
nlohmann::json result_json(const pipeline::GenerationJob& job, const Result<pipeline::JobReport>& r) {
    if (!r.ok())
        return {{"ok", false},
                {"code", static_cast<int>(r.status().code())},
                {"message", r.status().message()},
                {"field", r.status().field()}};
    const pipeline::JobReport& rep = r.value();
    nlohmann::json steps = nlohmann::json::array();
    for (const cache::StepRecord& s : rep.work.steps)
        steps.push_back({s.step, s.dit_call, s.cache_hit, s.blocks_executed, s.blocks_skipped, s.seconds,
                         s.useful_flops});
    return {{"ok", true},
            {"metrics", rep.metrics(job.task)},
            {"written", rep.written},
            {"encode_seconds", rep.encode_seconds},
            {"denoise_seconds", rep.denoise_seconds},
            {"decode_seconds", rep.decode_seconds},
            {"mux_seconds", rep.mux_seconds},
            {"work", {{"cache", rep.work.cache}, {"ranks", rep.work.ranks}, {"steps", steps}}}};
}

} // namespace

Result<std::unique_ptr<ops::Communicator>> connect_group_control(const runtime::ProcessRank& p) {
    if (p.master_port >= 65535)
        return invalid_argument("MASTER_PORT " + std::to_string(p.master_port) +
                                ": a serving group's control link takes the port after it");
    const ops::TcpRendezvous where{
        .addr = p.master_addr, .port = p.master_port + 1, .rank = p.rank, .size = p.world};
    auto c = ops::make_tcp_communicator(where);
    if (!c.ok()) return c.status().with_context("the serving group's control link");
    return c;
}

GroupLeader::GroupLeader(Engine::Impl& engine, std::unique_ptr<ops::Communicator> control)
    : engine_(engine), control_(std::move(control)) {
    if (control_) pinger_ = std::thread([this] { keep_alive(); });
}

GroupLeader::~GroupLeader() {
    stop();
}

Status GroupLeader::send(std::vector<uint8_t> message) {
    if (!broken_.empty()) return internal_error(broken_);
    const Status s = pipeline::broadcast_bytes(ops::Context::cpu(), *control_, message, 0, "job message");
    if (s.ok()) return s;
    std::lock_guard<std::mutex> lock(state_mu_);
    broken_ = "a rank of this serving group is gone (" + s.message() +
              "); the group must be restarted (its launcher restarts it)";
    return internal_error(broken_);
}

void GroupLeader::keep_alive() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
        if (wake_.wait_for(lock, kKeepAliveEvery, [&] { return stopping_; })) break;
        if (broken_.empty()) {
            if (Status s = send({kKeepAlive}); !s.ok())
                std::fprintf(stderr, "serve: rank 0: %s\n", broken_.c_str());
        }
    }
}

nlohmann::json GroupLeader::status() const {
    if (!control_) return nullptr;
    std::string broken;
    {
        std::lock_guard<std::mutex> lock(state_mu_);
        broken = broken_;
    }
    nlohmann::json j = {{"replica", 0},
                        {"state", !broken.empty()   ? "broken"
                                  : running_.load() ? "running"
                                                    : "ready"},
                        {"ranks", control_->size()}};
    if (!broken.empty()) j["error"] = broken;
    return j;
}

void GroupLeader::stop() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) return;
        stopping_ = true;
        if (control_ && broken_.empty()) (void)send({kStopMessage});
    }
    wake_.notify_all();
    if (pinger_.joinable()) pinger_.join();
}

Result<pipeline::JobReport> GroupLeader::run(const pipeline::GenerationJob& job,
                                             const pipeline::JobEvents& events) {
    std::lock_guard<std::mutex> lock(mu_); // no keep-alive while a job runs
    running_ = true;
    struct Idle {
        std::atomic<bool>& flag;
        ~Idle() { flag = false; }
    } idle{running_};
    if (control_) {
        if (!job.source)
            return internal_error(
                "a serving group's job must keep its input (JobBuilderOptions::keep_source)");
        if (events.cancel && events.cancel->load()) return cancelled("cancelled before it started");
        pipeline::JobInput in = *job.source;
        in.outputs = job.outputs;
        pipeline::ByteWriter w;
        const uint8_t kind = kJobMessage;
        w.raw(&kind, 1);
        w.i64(static_cast<int64_t>(++jobs_));
        const std::vector<uint8_t> input = pack_job_input(in);
        w.raw(input.data(), input.size());
        H3_TRY(send(std::move(w.out)));
    }
    return engine_.run(job, events);
}

Status run_group_follower(Engine::Impl& engine, ops::Communicator& control) {
    const int rank = control.rank();
    while (true) {
        std::vector<uint8_t> msg;
        H3_TRY(pipeline::broadcast_bytes(ops::Context::cpu(), control, msg, 0, "job message")
                   .with_context("rank " + std::to_string(rank) + " waiting for rank 0's next job"));
        if (msg[0] == kKeepAlive) continue;
        if (msg[0] == kStopMessage) return ok_status();
        if (msg[0] != kJobMessage || msg.size() < 9)
            return internal_error("rank " + std::to_string(rank) + ": an unknown control message");
        int64_t seq = 0;
        std::memcpy(&seq, msg.data() + 1, 8);
        auto in = pipeline::unpack_job_input(std::vector<uint8_t>(msg.begin() + 9, msg.end()));
        Status s = in.status();
        if (in.ok()) {
            auto job = engine.build(std::move(*in));
            s = job.status();
            if (job.ok()) s = engine.run(*job, {}).status();
        }
        std::fprintf(stderr, "serve: rank %d: job %lld %s%s\n", rank, static_cast<long long>(seq),
                     s.ok() ? "done" : "ended: ", s.ok() ? "" : s.to_string().c_str());
        std::fflush(stderr);
    }
}

Status serve_job_channel(GroupLeader& leader, Engine::Impl& engine, int fd) {
    JobChannel ch(fd);
    H3_TRY(ch.send(FrameType::kReady, nlohmann::json{{"pid", static_cast<int64_t>(::getpid())}}.dump()));
    std::mutex mu;
    std::condition_variable cv;
    std::optional<Frame> pending;
    std::string running_id;
    bool stop = false;
    std::atomic<bool> cancel{false};
    std::thread reader([&] {
        while (true) {
            auto f = ch.receive(std::chrono::milliseconds(500));
            std::lock_guard<std::mutex> lock(mu);
            if (!f.ok() || (*f && (*f)->type == FrameType::kStop)) {
                stop = true;
                cancel = !f.ok(); // the server is gone: stop the job too
                cv.notify_all();
                return;
            }
            if (!*f) continue;
            if ((*f)->type == FrameType::kJob) {
                // the job's id (its frame starts with it) from now on: a cancel that follows at once counts
                pipeline::ByteReader rd((*f)->payload, "job frame");
                auto id = rd.bytes(4096);
                running_id = id.ok() ? std::string(id->begin(), id->end()) : "";
                cancel = false;
                pending = std::move(**f);
                cv.notify_all();
            } else if ((*f)->type == FrameType::kCancel && (*f)->text() == running_id) {
                cancel = true;
            }
        }
    });
    while (true) {
        Frame job_frame;
        {
            std::unique_lock<std::mutex> lock(mu);
            cv.wait(lock, [&] { return stop || pending; });
            if (!pending) break;
            job_frame = std::move(*pending);
            pending.reset();
        }
        const auto t0 = std::chrono::steady_clock::now();
        // the frame: the job's id (length-prefixed), then its input
        pipeline::ByteReader rd(job_frame.payload, "job frame");
        auto id = rd.bytes(4096);
        Result<pipeline::GenerationJob> job = id.status();
        if (id.ok()) {
            const size_t at = 8 + id->size();
            auto in = pipeline::unpack_job_input(std::vector<uint8_t>(
                job_frame.payload.begin() + static_cast<long>(at), job_frame.payload.end()));
            job = in.ok() ? engine.build(std::move(*in)) : Result<pipeline::GenerationJob>(in.status());
        }
        Result<pipeline::JobReport> r = job.status();
        auto t_run = t0;
        double run_seconds = 0;
        if (job.ok()) {
            pipeline::JobEvents ev;
            ev.cancel = &cancel;
            ev.progress = [&](const pipeline::JobProgress& p) {
                (void)ch.send(FrameType::kProgress, progress_json(p).dump());
            };
            t_run = std::chrono::steady_clock::now();
            r = leader.run(*job, ev);
            run_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_run).count();
        }
        const pipeline::GenerationJob none;
        nlohmann::json result = result_json(job.ok() ? *job : none, r);
        // the front's time minus run_seconds is the serving path's cost (bytes, channel, build, events)
        result["run_seconds"] = run_seconds;
        {
            std::lock_guard<std::mutex> lock(mu); // before the result: the next job's frame may follow it
            running_id.clear();
        }
        H3_TRY(ch.send(FrameType::kResult, result.dump()).with_context("answering the server"));
    }
    reader.join();
    leader.stop();
    return ok_status();
}

} // namespace h3
