// A test-only `h3-engine serve` (test_serve): the same options, plus --fault-inject-prompt PROMPT. The worker
// runs a stand-in around the real generator: a job whose prompt equals PROMPT stops after its first denoise
// step and fails with an injected out-of-memory error — the failure path of a real OOM (the job's state is
// released, its outputs removed, the next job runs). Production code carries no hook for it.
#include "cli/serve_command.h"
#include "core/log.h"

#include <CLI/CLI.hpp>

#include <atomic>
#include <memory>
#include <string>

namespace {

using namespace h3;

class FaultInjectingRunner final : public pipeline::JobRunner {
public:
    FaultInjectingRunner(pipeline::JobRunner& inner, std::string prompt)
        : inner_(inner), prompt_(std::move(prompt)) {}

    Result<pipeline::JobReport> run(const pipeline::GenerationJob& job,
                                    const pipeline::JobEvents& events) override {
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
    std::string prompt_;
};

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"h3-engine serve with an injected fault (tests only)"};
    cli::ServeOptions options;
    cli::add_serve_options(&app, options);
    std::string fault;
    app.add_option("--fault-inject-prompt", fault,
                   "a job with this prompt fails after its first denoise step")
        ->required();
    CLI11_PARSE(app, argc, argv);
    set_log_level("warn");
    return cli::run_serve(options, [&fault](pipeline::JobRunner& generator) {
        return std::make_unique<FaultInjectingRunner>(generator, fault);
    });
}
