#include "py_engine.h"

#include "core/device.h"
#include "pipeline/conditioner.h"
#include "pipeline/reference_files.h"
#include "py_convert.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <thread>

namespace h3::python {

namespace {

template <typename T> std::optional<T> opt(const py::object& v, const char* field) {
    if (v.is_none()) return std::nullopt;
    try {
        return v.cast<T>();
    } catch (const py::cast_error&) {
        raise_status(invalid_argument(std::string(field) + ": expected " + py::type_id<T>() + ", got " +
                                      py::str(py::type::of(v).attr("__name__")).cast<std::string>()),
                     field);
    }
}

py::dict progress_dict(const pipeline::JobProgress& p) {
    py::dict d;
    d["stage"] = pipeline::stage_name(p.stage);
    d["percent"] = p.percent;
    d["step"] = p.step;
    d["total"] = p.total;
    d["step_seconds"] = p.step_seconds;
    d["elapsed_seconds"] = p.elapsed_seconds;
    d["eta_seconds"] = p.eta_seconds;
    if (p.stage == pipeline::Stage::kLoad) d["component"] = p.component; // what is about to be read
    return d;
}

} // namespace

Engine::Engine(EngineOptions options) : options_(std::move(options)) {
    auto device = parse_device(options_.device);
    if (!device.ok()) raise_status(device.status().with_context("device"), "device");
    if (options_.dtype != "bf16" && options_.dtype != "fp32")
        raise_status(invalid_argument("dtype: '" + options_.dtype + "' must be bf16 or fp32"), "dtype");
    const auto precision =
        options_.dtype == "fp32" ? runtime::ComputePrecision::kFp32 : runtime::ComputePrecision::kDefault;
    const runtime::PlacementPlan plan =
        options_.keep_loaded
            ? runtime::PlacementPlan::serving(*device, precision,
                                              options_.keep_text_encoder ? runtime::Residency::kResident
                                                                         : runtime::Residency::kPerJob)
            : runtime::PlacementPlan::per_job(*device, precision);
    Result<std::unique_ptr<runtime::ModelStore>> store = [&] {
        py::gil_scoped_release nogil;
        return runtime::ModelStore::open(options_.checkpoint, plan);
    }();
    if (!store.ok()) raise_status(store.status());
    store_ = std::move(store).value();
    auto generator = pipeline::Generator::create(*store_);
    if (!generator.ok()) raise_status(generator.status());
    generator_ = std::move(generator).value();
    builder_ = std::make_unique<pipeline::JobBuilder>(store_->info(), pipeline::JobBuilderOptions{});
}

Engine::~Engine() = default;

pipeline::JobInput Engine::job_input(const GenerateArgs& a) const {
    pipeline::JobInput in;
    in.task = opt<std::string>(a.task, "task");
    in.prompt = opt<std::string>(a.prompt, "prompt");
    in.random_prompt_embeds = opt<int64_t>(a.random_prompt_embeds, "random_prompt_embeds");
    in.size = opt<std::string>(a.size, "size");
    in.aspect = opt<std::string>(a.aspect, "aspect");
    in.seconds = opt<double>(a.seconds, "seconds");
    in.frames = opt<int64_t>(a.frames, "frames");
    in.num_inference_steps = opt<int64_t>(a.steps, "steps");
    in.seed = opt<uint64_t>(a.seed, "seed");
    in.quality = opt<std::string>(a.quality, "quality");
    if (!a.cache.is_none()) in.cache = python_to_json(a.cache, "cache");
    if (!a.prompt_embeds.is_none()) {
        const std::string path = path_argument(a.prompt_embeds, "prompt_embeds");
        auto embeds = pipeline::make_embeds_conditioner(path, 0); // width checked by the builder
        if (!embeds.ok()) raise_status(embeds.status(), "prompt_embeds");
        auto rows = (*embeds)->encode({});
        if (!rows.ok()) raise_status(rows.status(), "prompt_embeds");
        in.prompt_embeds = std::move(rows).value();
        in.prompt_embeds_source = path;
    }
    if (!a.first_frame.is_none()) in.first_frame = image_argument(a.first_frame, "first_frame");
    if (!a.last_frame.is_none()) in.last_frame = image_argument(a.last_frame, "last_frame");
    if (!a.references.is_none()) {
        if (py::isinstance<py::str>(a.references) || !py::isinstance<py::sequence>(a.references))
            raise_status(invalid_argument("reference: references must be a list of paths "
                                          "([image:|video:|audio:]FILE)"),
                         "reference");
        for (const py::handle item : a.references) {
            const std::string spec = path_argument(item, "reference");
            auto r = pipeline::read_reference(pipeline::parse_reference_spec(spec));
            if (!r.ok()) raise_status(r.status().with_context("reference " + spec), "reference");
            in.references.push_back(std::move(r).value());
        }
    }
    if (!a.output.is_none())
        in.outputs.media = pipeline::media_targets_for(path_argument(a.output, "output"));
    if (!a.save_latents.is_none()) in.outputs.latents = path_argument(a.save_latents, "save_latents");
    in.outputs.return_media = a.return_media;
    if (in.outputs.empty())
        raise_status(invalid_argument("output: nothing to produce: return_media=False needs output= or "
                                      "save_latents="),
                     "output");
    return in;
}

GenerateResult Engine::generate(const GenerateArgs& args) {
    if (busy_.exchange(true))
        raise_status(invalid_argument("engine: a generate() call is already running on this engine (one job "
                                      "at a time; use another Engine or wait)"));
    struct BusyReset {
        std::atomic<bool>& b;
        ~BusyReset() { b.store(false); }
    } busy_reset{busy_};

    pipeline::JobInput in = job_input(args);
    std::string field;
    Result<pipeline::GenerationJob> job = [&] {
        py::gil_scoped_release nogil; // references are normalized here
        return builder_->build(std::move(in), &field);
    }();
    if (!job.ok()) raise_status(job.status(), field);

    // The job runs on a worker thread; this thread waits without the GIL, runs the progress callback and
    // watches for Ctrl-C.
    struct Shared {
        std::mutex mu;
        std::condition_variable cv;
        std::deque<pipeline::JobProgress> events;
        bool done = false;
        std::optional<Result<pipeline::JobReport>> result;
    } sh;
    cancel_.store(false);
    pipeline::JobEvents events;
    events.cancel = &cancel_;
    const bool want_progress = !args.progress.is_none();
    if (want_progress)
        events.progress = [&sh](const pipeline::JobProgress& p) {
            std::lock_guard<std::mutex> lock(sh.mu);
            sh.events.push_back(p);
            sh.cv.notify_all();
        };
    std::thread worker([&] {
        auto r = generator_->run(*job, events);
        std::lock_guard<std::mutex> lock(sh.mu);
        sh.result.emplace(std::move(r));
        sh.done = true;
        sh.cv.notify_all();
    });
    struct JoinGuard { // an unexpected exception below still cancels and joins the worker
        std::thread& t;
        std::atomic<bool>& cancel;
        ~JoinGuard() {
            if (!t.joinable()) return;
            cancel.store(true);
            py::gil_scoped_release nogil;
            t.join();
        }
    } join_guard{worker, cancel_};
    std::optional<py::error_already_set> pending; // from the callback or a signal handler
    for (bool done = false; !done;) {
        std::deque<pipeline::JobProgress> batch;
        {
            py::gil_scoped_release nogil;
            std::unique_lock<std::mutex> lock(sh.mu);
            sh.cv.wait_for(lock, std::chrono::milliseconds(100),
                           [&] { return sh.done || !sh.events.empty(); });
            batch.swap(sh.events);
            done = sh.done;
        }
        for (const pipeline::JobProgress& p : batch) {
            if (pending) break;
            try {
                args.progress(progress_dict(p));
            } catch (py::error_already_set& e) {
                pending.emplace(std::move(e));
                cancel_.store(true);
            }
        }
        if (!pending && PyErr_CheckSignals() != 0) { // KeyboardInterrupt (or another handler's exception)
            pending.emplace();
            cancel_.store(true);
        }
    }
    {
        py::gil_scoped_release nogil;
        worker.join();
    }
    if (pending) throw std::move(*pending);
    Result<pipeline::JobReport> r = std::move(*sh.result);
    if (!r.ok()) raise_status(r.status());

    GenerateResult out;
    out.frames = tensor_to_numpy(r->decoded_frames);
    out.audio = tensor_to_numpy(r->decoded_audio);
    if (!r->decoded_frames.defined()) out.frames = py::none();
    if (!r->decoded_audio.defined()) out.audio = py::none();
    out.sample_rate = r->sample_rate;
    out.fps = job->geometry.spec.fps;
    out.width = job->geometry.width;
    out.height = job->geometry.height;
    out.num_frames = job->geometry.frames;
    out.seed = job->seed;
    out.steps = job->steps;
    out.task = pipeline::task_name(job->task);
    out.written = r->written;
    out.metrics = json_to_python(r->metrics(job->task));
    return out;
}

} // namespace h3::python
