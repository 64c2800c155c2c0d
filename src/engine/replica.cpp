#include "engine/replica.h"

#include "core/log.h"
#include "pipeline/byte_codec.h"
#include "pipeline/job_input_bytes.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace h3 {

namespace {

Result<nlohmann::json> parse_frame_json(const Frame& f) {
    try {
        return nlohmann::json::parse(f.text());
    } catch (const std::exception& e) {
        return internal_error(std::string("a malformed frame from the replica's rank 0: ") + e.what());
    }
}

// rank 0's result → the report the worker records (the metrics as rank 0 computed them).
Result<pipeline::JobReport> report_of(const nlohmann::json& j) {
    if (!j.value("ok", false)) {
        Status s(static_cast<ErrorCode>(j.value("code", static_cast<int>(ErrorCode::kInternal))),
                 j.value("message", std::string("the replica's rank 0 failed")));
        const std::string field = j.value("field", std::string());
        return field.empty() ? s : s.with_field(field);
    }
    pipeline::JobReport r;
    r.remote_metrics = j.at("metrics");
    r.written = j.at("written").get<std::vector<std::string>>();
    r.encode_seconds = j.at("encode_seconds").get<double>();
    r.denoise_seconds = j.at("denoise_seconds").get<double>();
    r.decode_seconds = j.at("decode_seconds").get<double>();
    r.mux_seconds = j.at("mux_seconds").get<double>();
    const nlohmann::json& w = j.at("work");
    r.work.cache = w.at("cache").get<std::string>();
    r.work.ranks = w.at("ranks").get<int>();
    for (const nlohmann::json& s : w.at("steps")) {
        cache::StepRecord st;
        st.step = s.at(0).get<int>();
        st.dit_call = s.at(1).get<bool>();
        st.cache_hit = s.at(2).get<bool>();
        st.blocks_executed = s.at(3).get<int>();
        st.blocks_skipped = s.at(4).get<int>();
        st.seconds = s.at(5).get<double>();
        st.useful_flops = s.at(6).get<double>();
        r.work.steps.push_back(st);
    }
    return r;
}

} // namespace

Result<std::vector<ReplicaSpec>> plan_replicas(const std::vector<int>& slots, int sp, int ring, int tp,
                                               bool cuda, const std::vector<std::string>& argv) {
    const int world = sp * ring * tp;
    if (slots.empty()) return invalid_field("gpus", "gpus: the list is empty");
    for (size_t i = 0; i < slots.size(); ++i)
        for (size_t k = 0; k < i; ++k)
            if (slots[i] == slots[k])
                return invalid_field("gpus", "gpus: " + std::to_string(slots[i]) + " is listed twice");
    if (slots.size() % static_cast<size_t>(world) != 0)
        return invalid_field(
            "gpus", "gpus: " + std::to_string(slots.size()) +
                        " devices do not split into replicas of sp·ring·tp = " + std::to_string(world) +
                        " (sp " + std::to_string(sp) + " x ring " + std::to_string(ring) + " x tp " +
                        std::to_string(tp) + "); list a multiple of " + std::to_string(world));
    std::vector<ReplicaSpec> out;
    for (size_t first = 0; first < slots.size(); first += static_cast<size_t>(world)) {
        ReplicaSpec r;
        r.index = static_cast<int>(out.size());
        r.argv = argv;
        r.world = world;
        r.slots.assign(slots.begin() + static_cast<long>(first),
                       slots.begin() + static_cast<long>(first + world));
        if (cuda) r.gpus = r.slots;
        if (!cuda && !std::getenv("OMP_WAIT_POLICY")) r.env.push_back({"OMP_WAIT_POLICY", "PASSIVE"});
        out.push_back(std::move(r));
    }
    return out;
}

Replica::Replica(ReplicaSpec spec) : spec_(std::move(spec)) {}

Replica::~Replica() {
    stop();
}

void Replica::set_state(const char* s) {
    std::lock_guard<std::mutex> lock(mu_);
    state_ = s;
}

Status Replica::start() {
    return launch({});
}

Status Replica::launch(const std::function<bool()>& stop) {
    set_state(starts_ == 0 ? "starting" : "restarting");
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return io_error(name() + ": socketpair: " + std::strerror(errno));
    RankLaunch l;
    l.argv = spec_.argv;
    l.world = spec_.world;
    l.gpus = spec_.gpus;
    l.set_rank_env = spec_.world > 1;
    l.env = spec_.env;
    l.rank0_env = {{"H3_JOB_CHANNEL_FD", std::to_string(sv[1])}};
    l.rank0_fd = sv[1];
    l.own_process_group = true;
    auto procs = RankProcesses::start(l);
    ::close(sv[1]);
    if (!procs.ok()) {
        ::close(sv[0]);
        set_state("down");
        return procs.status().with_context(name());
    }
    procs_ = std::move(*procs);
    channel_ = std::make_unique<JobChannel>(sv[0]);
    ++starts_;
    {
        std::lock_guard<std::mutex> lock(mu_);
        pids_.clear();
        for (pid_t p : procs_.pids()) pids_.push_back(p);
    }
    const auto deadline = std::chrono::steady_clock::now() + spec_.start_timeout;
    while (true) {
        auto f = channel_->receive(std::chrono::milliseconds(200));
        if (!f.ok() || std::chrono::steady_clock::now() > deadline) {
            std::optional<RankExit> dead = dead_rank(std::chrono::seconds(2));
            procs_.stop(std::chrono::seconds(2));
            set_state("down");
            needs_restart_ = true;
            return internal_error(name() + " did not start: " +
                                  (dead      ? dead->describe()
                                   : !f.ok() ? f.status().message()
                                             : "rank 0 was not ready within " +
                                                   std::to_string(spec_.start_timeout.count()) + " s"));
        }
        if (*f && (*f)->type == FrameType::kReady) break;
        if (stop && stop()) { // a shutdown while the replica restarts: it stays down
            procs_.stop(std::chrono::seconds(2));
            set_state("down");
            needs_restart_ = true;
            return cancelled(name() + ": the server stopped while the replica started");
        }
    }
    set_state("ready");
    needs_restart_ = false;
    H3_LOG_INFO("serve: {} ready ({} rank process(es), port {})", name(), spec_.world, procs_.port());
    return ok_status();
}

std::optional<RankExit> Replica::dead_rank(std::chrono::milliseconds grace) {
    const auto deadline = std::chrono::steady_clock::now() + grace;
    while (true) {
        if (std::optional<RankExit> e = procs_.reap()) return e;
        if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

Status Replica::prepare(const std::function<bool()>& stop) {
    if (!needs_restart_) {
        if (std::optional<RankExit> e = procs_.reap()) {
            std::fprintf(stderr, "serve: %s: %s while idle; restarting it\n", name().c_str(),
                         e->describe().c_str());
            needs_restart_ = true;
        }
    }
    if (!needs_restart_) return ok_status();
    set_state("restarting");
    procs_.stop(std::chrono::seconds(5));
    channel_.reset();
    {
        std::lock_guard<std::mutex> lock(mu_);
        ++restarts_;
    }
    return launch(stop);
}

Result<pipeline::JobReport> Replica::run(const pipeline::GenerationJob& job,
                                         const pipeline::JobEvents& events) {
    H3_TRY(prepare([&] { return events.cancel && events.cancel->load(); }));
    if (!job.source)
        return internal_error("a replica's job must keep its input (JobBuilderOptions::keep_source)");
    pipeline::JobInput in = *job.source;
    in.outputs = job.outputs;
    const std::string id = std::to_string(++jobs_sent_);
    pipeline::ByteWriter w;
    w.bytes(id.data(), id.size());
    const std::vector<uint8_t> input = pack_job_input(in);
    w.raw(input.data(), input.size());
    set_state("running");
    const auto t0 = std::chrono::steady_clock::now();
    const auto fail = [&](const std::string& what) -> Status {
        needs_restart_ = true;
        procs_.stop(std::chrono::seconds(5));
        set_state("restarting");
        std::fprintf(stderr, "serve: %s: %s\n", name().c_str(), what.c_str());
        return internal_error(name() + ": " + what);
    };
    if (Status s = channel_->send(FrameType::kJob, w.out.data(), w.out.size()); !s.ok()) {
        std::optional<RankExit> dead = dead_rank(std::chrono::seconds(1));
        return fail((dead ? dead->describe() : s.message()) +
                    " before the job started; the job failed (it is "
                    "not re-queued) and the replica restarts");
    }
    bool cancel_sent = false;
    std::string component, part; // the progress event's strings live while it is delivered
    while (true) {
        if (events.cancel && events.cancel->load() && !cancel_sent) {
            (void)channel_->send(FrameType::kCancel, id);
            cancel_sent = true;
        }
        if (std::optional<RankExit> dead = procs_.reap())
            return fail(dead->describe() + " while the job ran; the job failed (it is not re-queued) and the "
                                           "replica restarts");
        auto f = channel_->receive(std::chrono::milliseconds(100));
        if (!f.ok()) {
            std::optional<RankExit> dead = dead_rank(std::chrono::seconds(2));
            return fail(
                (dead ? dead->describe() : "rank 0 closed the job channel (" + f.status().message() + ")") +
                " while the job ran; the job failed (it is not re-queued) and the replica restarts");
        }
        if (!*f) continue;
        H3_ASSIGN_OR_RETURN(nlohmann::json j, parse_frame_json(**f));
        if ((*f)->type == FrameType::kProgress) {
            if (!events.progress) continue;
            pipeline::JobProgress p;
            p.stage = static_cast<pipeline::Stage>(j.value("stage", 0));
            p.percent = j.value("percent", 0.0);
            p.step = j.value("step", 0);
            p.total = j.value("total", 0);
            p.step_seconds = j.value("step_seconds", 0.0);
            p.elapsed_seconds = j.value("elapsed_seconds", 0.0);
            p.eta_seconds = j.value("eta_seconds", 0.0);
            component = j.value("component", std::string());
            part = j.value("part", std::string());
            p.component = component.c_str();
            p.part = part.c_str();
            events.progress(p);
            continue;
        }
        if ((*f)->type != FrameType::kResult) continue;
        Result<pipeline::JobReport> r = internal_error("no result");
        try {
            r = report_of(j);
        } catch (const std::exception& e) {
            r = internal_error(name() + ": a malformed result from rank 0: " + e.what());
        }
        if (!r.ok() && r.status().code() != ErrorCode::kCancelled) {
            // a rank that died makes rank 0 fail first (its link closed): name the death, not the symptom
            if (std::optional<RankExit> dead = dead_rank(std::chrono::milliseconds(500)))
                return fail(dead->describe() + " while the job ran (rank 0: " + r.status().message() +
                            "); the job failed (it is not re-queued) and the replica restarts");
        }
        H3_LOG_INFO("serve: {}: job {} took {:.4f} s here, {:.4f} s in rank 0's run", name(), id,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                    j.value("run_seconds", 0.0));
        if (r.ok()) {
            std::lock_guard<std::mutex> lock(mu_);
            if (r->remote_metrics.contains("component_loads"))
                loads_ = r->remote_metrics["component_loads"].get<std::map<std::string, uint64_t>>();
        }
        set_state("ready");
        return r;
    }
}

std::map<std::string, uint64_t> Replica::component_loads() const {
    std::lock_guard<std::mutex> lock(mu_);
    return loads_;
}

void Replica::stop() {
    if (channel_) {
        (void)channel_->send(FrameType::kStop, std::string());
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (procs_.running() > 0 && std::chrono::steady_clock::now() < deadline) {
            while (procs_.reap()) {
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        channel_.reset();
    }
    procs_.stop(std::chrono::seconds(5));
    set_state("down");
}

nlohmann::json Replica::status() const {
    std::lock_guard<std::mutex> lock(mu_);
    return {{"replica", spec_.index}, {"state", state_}, {"ranks", spec_.world},
            {"slots", spec_.slots},   {"pids", pids_},   {"restarts", restarts_}};
}

} // namespace h3
