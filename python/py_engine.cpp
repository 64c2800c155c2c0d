#include "py_engine.h"

#include "core/device.h"
#include "pipeline/conditioner.h"
#include "pipeline/reference_files.h"
#include "py_convert.h"

#include <pybind11/stl.h>

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

namespace {

template <typename T> T option(const py::handle& v, const std::string& name) {
    try {
        return v.cast<T>();
    } catch (const py::cast_error&) {
        raise_status(invalid_field(name, name + ": expected " + py::type_id<T>() + ", got " +
                                             py::str(py::type::of(v).attr("__name__")).cast<std::string>()));
    }
}

// An adapter: "FILE", "FILE:SCALE"-free path with a scale given apart: ("FILE", 0.8) or {"path": FILE,
// "scale": 0.8} (the HTTP API's form).
h3::LoraOption lora_item(const py::handle& item, const std::string& field) {
    h3::LoraOption l;
    if (py::isinstance<py::dict>(item)) {
        py::dict d = py::reinterpret_borrow<py::dict>(item);
        if (!d.contains("path"))
            raise_status(invalid_field(field, field + ": an adapter is {\"path\": NAME, \"scale\": S}"));
        l.path = path_argument(d["path"], field);
        if (d.contains("scale")) l.scale = option<double>(d["scale"], field);
        return l;
    }
    if (py::isinstance<py::tuple>(item)) {
        py::tuple t = py::reinterpret_borrow<py::tuple>(item);
        if (t.size() != 2) raise_status(invalid_field(field, field + ": an adapter tuple is (path, scale)"));
        l.path = path_argument(t[0], field);
        l.scale = option<double>(t[1], field);
        return l;
    }
    l.path = path_argument(item, field);
    return l;
}

std::vector<h3::LoraOption> lora_list(const py::handle& v, const std::string& field) {
    if (py::isinstance<py::str>(v) || !py::isinstance<py::sequence>(v))
        raise_status(invalid_field(field, field + ": expected a list of adapters (paths, (path, scale) or "
                                                  "{\"path\", \"scale\"})"));
    std::vector<h3::LoraOption> out;
    for (const py::handle item : v) out.push_back(lora_item(item, field));
    return out;
}

} // namespace

h3::EngineOptions engine_options(const py::object& checkpoint, const py::kwargs& kw) {
    h3::EngineOptions o;
    o.checkpoint = path_argument(checkpoint, "checkpoint");
    o.keep_loaded = true;
    for (const auto item : kw) {
        const std::string k = item.first.cast<std::string>();
        const py::handle value = item.second;
        const auto str = [&](std::string& dst) {
            dst = value.is_none() ? std::string() : option<std::string>(value, k);
        };
        if (k == "device")
            str(o.device);
        else if (k == "dtype")
            str(o.dtype);
        else if (k == "precision")
            str(o.precision);
        else if (k == "vae_precision")
            str(o.vae_precision);
        else if (k == "residency")
            str(o.residency);
        else if (k == "resident_blocks")
            o.resident_blocks = value.is_none() ? -1 : option<int>(value, k);
        else if (k == "weight_dtype")
            str(o.weight_dtype);
        else if (k == "host_pinning")
            o.host_pinning = option<bool>(value, k);
        else if (k == "gpu_memory_budget")
            o.gpu_memory_budget = value.is_none() ? std::string()
                                  : py::isinstance<py::int_>(value)
                                      ? std::to_string(option<uint64_t>(value, k))
                                      : option<std::string>(value, k);
        else if (k == "int8_cache")
            o.int8_cache = value.is_none() ? std::string() : path_argument(value, k);
        else if (k == "keep_loaded")
            o.keep_loaded = option<bool>(value, k);
        else if (k == "keep_text_encoder")
            o.keep_text_encoder = option<bool>(value, k);
        else if (k == "keep_dit_workspace")
            o.keep_dit_workspace = option<bool>(value, k);
        else if (k == "sp")
            o.sp = option<int>(value, k);
        else if (k == "tp")
            o.tp = option<int>(value, k);
        else if (k == "ring")
            o.ring = option<int>(value, k);
        else if (k == "gpus")
            o.gpus = value.is_none() ? std::vector<int>{} : option<std::vector<int>>(value, k);
        else if (k == "lora")
            o.lora = value.is_none() ? std::vector<h3::LoraOption>{} : lora_list(value, k);
        else if (k == "lora_mode")
            str(o.lora_mode);
        else if (k == "lora_dir")
            o.lora_dir = value.is_none() ? std::string() : path_argument(value, k);
        else if (k == "lora_strict")
            o.lora_strict = option<bool>(value, k);
        else if (k == "lora_qkv_rows")
            str(o.lora_qkv_rows);
        else if (k == "lora_cache_bytes")
            o.lora_cache_bytes = option<uint64_t>(value, k);
        else if (k == "attention")
            str(o.attention);
        else if (k == "cache")
            str(o.cache);
        else if (k == "max_prompt_bytes")
            o.max_prompt_bytes = option<size_t>(value, k);
        else if (k == "max_steps")
            o.max_steps = option<int>(value, k);
        else if (k == "reference_image_edge")
            o.reference_image_edge = option<int>(value, k);
        else if (k == "reference_video_edge")
            o.reference_video_edge = option<int>(value, k);
        else
            raise_status(invalid_field(
                k, k + ": not an engine option (device, dtype, precision, residency, "
                       "resident_blocks, weight_dtype, host_pinning, gpu_memory_budget, "
                       "int8_cache, keep_loaded, keep_text_encoder, keep_dit_workspace, sp, tp, "
                       "ring, gpus, "
                       "lora, lora_mode, lora_dir, lora_strict, lora_qkv_rows, "
                       "lora_cache_bytes, attention, cache, max_prompt_bytes, max_steps, "
                       "reference_image_edge, reference_video_edge)"));
    }
    return o;
}

Engine::Engine(h3::EngineOptions options) {
    Result<std::unique_ptr<h3::Engine>> engine = [&] {
        py::gil_scoped_release nogil;
        return h3::Engine::Impl::open(std::move(options), {});
    }();
    if (!engine.ok()) raise_status(engine.status());
    engine_ = std::move(engine).value();
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
    if (!a.steps.is_none() && !a.num_inference_steps.is_none())
        raise_status(invalid_field("num_inference_steps",
                                   "num_inference_steps: give it or its alias steps, not both"));
    in.num_inference_steps =
        opt<int64_t>(a.steps.is_none() ? a.num_inference_steps : a.steps, "num_inference_steps");
    in.attention = opt<std::string>(a.attention, "attention");
    if (!a.lora.is_none())
        for (const h3::LoraOption& l : lora_list(a.lora, "lora"))
            in.adapters.lora.push_back({l.path, l.scale});
    in.adapters.lora_strict = opt<bool>(a.lora_strict, "lora_strict");
    in.adapters.preset = opt<std::string>(a.preset, "preset");
    in.adapters.video_shift = opt<double>(a.video_shift, "video_shift");
    in.adapters.audio_shift = opt<double>(a.audio_shift, "audio_shift");
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
    if (!a.reference.is_none() && !a.references.is_none())
        raise_status(invalid_field("reference", "reference: give it or its alias references, not both"));
    const py::object& refs = a.reference.is_none() ? a.references : a.reference;
    if (!refs.is_none()) {
        if (py::isinstance<py::str>(refs) || !py::isinstance<py::sequence>(refs))
            raise_status(invalid_argument("reference: references must be a list of paths "
                                          "([image:|video:|audio:]FILE)"),
                         "reference");
        for (const py::handle item : refs) {
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

GenerateArgs generate_args(const py::kwargs& fields) {
    static const std::map<std::string, py::object GenerateArgs::*> members = {
        {"prompt", &GenerateArgs::prompt},
        {"prompt_embeds", &GenerateArgs::prompt_embeds},
        {"random_prompt_embeds", &GenerateArgs::random_prompt_embeds},
        {"task", &GenerateArgs::task},
        {"size", &GenerateArgs::size},
        {"aspect", &GenerateArgs::aspect},
        {"seconds", &GenerateArgs::seconds},
        {"frames", &GenerateArgs::frames},
        {"num_inference_steps", &GenerateArgs::num_inference_steps},
        {"steps", &GenerateArgs::steps},
        {"seed", &GenerateArgs::seed},
        {"cache", &GenerateArgs::cache},
        {"quality", &GenerateArgs::quality},
        {"attention", &GenerateArgs::attention},
        {"first_frame", &GenerateArgs::first_frame},
        {"last_frame", &GenerateArgs::last_frame},
        {"reference", &GenerateArgs::reference},
        {"references", &GenerateArgs::references},
        {"lora", &GenerateArgs::lora},
        {"lora_strict", &GenerateArgs::lora_strict},
        {"preset", &GenerateArgs::preset},
        {"video_shift", &GenerateArgs::video_shift},
        {"audio_shift", &GenerateArgs::audio_shift},
        {"output", &GenerateArgs::output},
        {"save_latents", &GenerateArgs::save_latents}};
    GenerateArgs a;
    for (const auto& [name, member] : members)
        a.*member = py::none(); // absent: None, as generate()'s defaults
    a.progress = py::none();
    for (const auto& [name, value] : fields) {
        const std::string k = py::str(name);
        if (k == "return_media") {
            a.return_media = option<bool>(py::reinterpret_borrow<py::object>(value), k);
            continue;
        }
        auto it = members.find(k);
        if (it == members.end())
            raise_status(invalid_field(k, k + ": not a job field (those of generate(), without progress)"));
        a.*(it->second) = py::reinterpret_borrow<py::object>(value);
    }
    return a;
}

py::dict Engine::warm_up(const GenerateArgs& args) {
    if (busy_.exchange(true))
        raise_status(invalid_argument("engine: a generate() or warm_up() call is already running on this "
                                      "engine (one at a time; use another Engine or wait)"));
    struct BusyReset {
        std::atomic<bool>& b;
        ~BusyReset() { b.store(false); }
    } busy_reset{busy_};
    pipeline::JobInput in = job_input(args);
    cancel_.store(false);
    const auto t0 = std::chrono::steady_clock::now();
    Result<pipeline::JobReport> r = internal_error("the warm-up did not run");
    pipeline::Task task = pipeline::Task::kT2va;
    {
        py::gil_scoped_release nogil;
        Result<pipeline::GenerationJob> job = engine_->impl().build_warm_up(std::move(in));
        if (job.ok()) {
            task = job->task;
            r = engine_->impl().warm_up(*job, {.cancel = &cancel_});
        } else {
            r = job.status();
        }
    }
    if (!r.ok()) raise_status(r.status());
    py::dict out;
    out["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out["encode_seconds"] = r->encode_seconds;
    out["step_seconds"] = r->step_seconds;
    out["metrics"] = json_to_python(r->metrics(task));
    return out;
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
    Result<pipeline::GenerationJob> job = [&] {
        py::gil_scoped_release nogil; // references are normalized here
        return engine_->impl().build(std::move(in));
    }();
    if (!job.ok()) raise_status(job.status());

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
        auto r = engine_->impl().run(*job, events);
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
