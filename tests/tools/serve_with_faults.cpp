// A test-only `h3-engine serve` (test_serve): the same options, plus --fault-inject-prompt PROMPT. The worker
// runs a stand-in around the real generator: a job whose prompt equals PROMPT stops after its first denoise
// step and fails with an injected out-of-memory error — the failure path of a real OOM (the job's state is
// released, its outputs removed, the next job runs). Production code carries no hook for it. With
// --fault-stuck-prompt PROMPT a job whose prompt equals it reports the encode stage and then waits 120 s
// without reading its cancel flag: an op that never looks at it, for the SIGTERM grace timer's test.
#include "cli/serve_command.h"
#include "core/log.h"

#include <CLI/CLI.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

namespace {

using namespace h3;

class FaultInjectingRunner final : public pipeline::JobRunner {
public:
    FaultInjectingRunner(pipeline::JobRunner& inner, std::string prompt, std::string stuck)
        : inner_(inner), prompt_(std::move(prompt)), stuck_(std::move(stuck)) {}

    Result<pipeline::JobReport> run(const pipeline::GenerationJob& job,
                                    const pipeline::JobEvents& events) override {
        if (!stuck_.empty() && job.prompt == stuck_) {
            if (events.progress) events.progress({.stage = pipeline::Stage::kEncode, .percent = 1});
            std::this_thread::sleep_for(std::chrono::seconds(120)); // deaf to the cancel flag
            return internal_error("the stuck job ended");
        }
        if (job.prompt != prompt_) return inner_.run(job, events);
        std::atomic<bool> stop{false};
        bool fired = false;
        pipeline::JobEvents mine;
        mine.cancel = &stop;
        mine.progress = [&](const pipeline::JobProgress& p) {
            if (events.progress) events.progress(p);
            if (events.cancel && events.cancel->load()) stop = true;
            if (p.stage == pipeline::Stage::kDenoise && p.step >= 1 && !fired) {
                fired = true;
                stop = true; // the loop stops like a failing allocation would stop it
            }
        };
        auto r = inner_.run(job, mine);
        if (fired)
            return out_of_memory("injected fault: simulated out of device memory after denoise step 1");
        return r;
    }
    std::map<std::string, uint64_t> component_loads() const override { return inner_.component_loads(); }

private:
    pipeline::JobRunner& inner_;
    std::string prompt_, stuck_;
};

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"h3-engine serve with an injected fault (tests only)"};
    cli::ServeOptions options;
    cli::add_serve_options(&app, options);
    std::string fault, stuck;
    app.add_option("--fault-inject-prompt", fault,
                   "a job with this prompt fails after its first denoise step")
        ->required();
    app.add_option("--fault-stuck-prompt", stuck, "a job with this prompt ignores its cancel flag for 120 s");
    CLI11_PARSE(app, argc, argv);
    set_log_level("warn");
    return cli::run_serve(options, [&fault, &stuck](pipeline::JobRunner& generator) {
        return std::make_unique<FaultInjectingRunner>(generator, fault, stuck);
    });
}
