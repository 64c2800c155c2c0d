// h3-engine encode --model DIR --prompt TEXT --output FILE [--device] [--dtype] [--tokens-only]
//                  [--first-frame IMG] [--last-frame IMG] [--size WxH] [--reference FILE ...]
// Runs the conditioner (tokenizer + Qwen3-VL layers 0..49) on a prompt. Writes a safetensors file that
// `generate --prompt-embeds` reads: prompt_embeds [L, text_dim], prompt_tags i32 [L], input_ids i32 [L].
// With keyframes (fl2va) or references (ref2va) the prompt is presented with them exactly as `generate`
// presents it (keyframes on the canvas, references normalized by the same rules); input_ids is then absent
// (vision rows have no single token). --tokens-only prints the token ids as a JSON array (and writes them
// to --output if given); it needs only the tokenizer (a tokenizer folder or a checkpoint root).
#include "cli/app.h"
#include "cli/commands.h"
#include "cli/device_setup.h"
#include "cli/field_flags.h"
#include "cli/reference_options.h"
#include "io/image_reader.h"
#include "io/safetensors.h"
#include "model/tokenizer/tokenizer.h"
#include "pipeline/job_builder.h"
#include "pipeline/ref2va.h"
#include "pipeline/reference_files.h"
#include "pipeline/text_conditioner.h"
#include "runtime/model_store.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>

namespace h3::cli {

namespace {

struct EncodeOptions {
    std::string model, prompt, output, device = "cpu", dtype = "bf16";
    std::string first_frame, last_frame, size;
    std::vector<std::string> references;
    int frames = 0;
    double seconds = 0;
    int reference_image_edge = pipeline::JobBuilderOptions{}.reference_image_edge;
    int reference_video_edge = pipeline::JobBuilderOptions{}.reference_video_edge;
    bool tokens_only = false;
    CLI::App* sub = nullptr;
};

// The flags as the job builder's input (the files they name are read here), then the job against the
// checkpoint's configs: the keyframes on their canvas and the references normalized exactly as generate does.
Result<pipeline::GenerationJob> presented_job(const EncodeOptions& o) {
    pipeline::JobInput in;
    in.prompt = o.prompt;
    in.seed = 0; // the conditioner draws nothing; the builder only needs a seed to be given
    if (!o.size.empty()) in.size = o.size;
    if (o.sub->count("--frames")) in.frames = o.frames;
    if (o.sub->count("--seconds")) in.seconds = o.seconds;
    for (auto [path, slot] :
         {std::pair{&o.first_frame, &in.first_frame}, std::pair{&o.last_frame, &in.last_frame}}) {
        if (path->empty()) continue;
        H3_ASSIGN_OR_RETURN(*slot, io::read_image(*path));
    }
    for (const std::string& spec : o.references) {
        auto r = pipeline::read_reference(pipeline::parse_reference_spec(spec));
        if (!r.ok()) return r.status().with_context("--reference " + spec);
        in.references.push_back(std::move(r).value());
    }
    const pipeline::JobBuilderOptions bo{.reference_image_edge = o.reference_image_edge,
                                         .reference_video_edge = o.reference_video_edge};
    std::string field;
    if (Status s = pipeline::JobBuilder::check(in, bo, &field); !s.ok()) return with_flag(s, field);
    auto device = parse_device(o.device);
    if (!device.ok()) return device.status().with_context("--device");
    // configs only: the store loads nothing until a lease, and this command takes none
    auto store = runtime::ModelStore::open(o.model, runtime::PlacementPlan::per_job(*device));
    if (!store.ok()) return store.status();
    auto job = pipeline::JobBuilder((*store)->info(), bo).build(std::move(in), &field);
    if (!job.ok()) return with_flag(job.status(), field);
    return job;
}

// The fl2va / ref2va presentation: keyframes or references with the prompt, as generate presents them.
int encode_presented(const EncodeOptions& o, pipeline::TextConditioner& cond,
                     std::chrono::steady_clock::time_point t0, std::chrono::steady_clock::time_point t1) {
    const bool keyframes = !o.first_frame.empty() || !o.last_frame.empty();
    auto job = presented_job(o);
    if (!job.ok()) return report(job.status());
    pipeline::ConditionerRequest rq;
    rq.prompt = o.prompt;
    if (job->keyframes)
        for (const io::RgbImage& im : job->keyframes->images)
            rq.images.push_back({im.width, im.height, im.pixels});
    if (job->references)
        for (const pipeline::NormalizedReference& r : *job->references)
            rq.references.push_back(pipeline::conditioner_reference(r));
    auto c = cond.encode(rq);
    if (!c.ok()) return report(c.status());
    const auto t2 = std::chrono::steady_clock::now();
    const int64_t L = c->rows();
    Tensor tags = Tensor::host({L}, DType::kI32);
    int64_t vision = 0;
    for (int64_t i = 0; i < L; ++i) {
        tags.data_as<int32_t>()[i] = c->tags[static_cast<size_t>(i)];
        vision += c->tags[static_cast<size_t>(i)] == pipeline::kTagVideo;
    }
    Status s = io::write_safetensors(o.output, {{"prompt_embeds", c->embeddings}, {"prompt_tags", tags}},
                                     {{"device", o.device},
                                      {"dtype", o.dtype},
                                      {"encoder", cond.name()},
                                      {"task", keyframes ? "fl2va" : "ref2va"}});
    if (!s.ok()) return report(s);
    std::printf("encoded %s -> [%lld, %lld] (%lld vision rows) %s on %s (load %.2f s, encode %.3f s) -> %s\n",
                keyframes ? "prompt + keyframes" : "prompt + references", static_cast<long long>(L),
                static_cast<long long>(c->embeddings.dim(1)), static_cast<long long>(vision), o.dtype.c_str(),
                o.device.c_str(), std::chrono::duration<double>(t1 - t0).count(),
                std::chrono::duration<double>(t2 - t1).count(), o.output.c_str());
    return kExitOk;
}

} // namespace

Command make_encode_command() {
    using Options = EncodeOptions;
    auto o = std::make_shared<Options>();
    Command c;
    c.setup = [o](CLI::App& app) {
        o->sub = app.add_subcommand("encode", "Tokenize a prompt and run the text encoder (the conditioner)");
        o->sub
            ->add_option("--model", o->model, "checkpoint root (or, with --tokens-only, a tokenizer folder)")
            ->required();
        o->sub->add_option("--prompt", o->prompt, "prompt text, used verbatim")->required();
        o->sub->add_option("--output", o->output, "output .safetensors (a .json of ids with --tokens-only)");
        o->sub->add_option("--device", o->device, "cpu | cuda | cuda:N")->capture_default_str();
        o->sub->add_option("--dtype", o->dtype, "bf16 | fp32")
            ->check(CLI::IsMember({"bf16", "fp32"}))
            ->capture_default_str();
        o->sub->add_flag("--tokens-only", o->tokens_only, "print the token ids as a JSON array (no weights)");
        o->sub->add_option("--first-frame", o->first_frame,
                           "fl2va: the first keyframe, presented with the prompt");
        o->sub->add_option("--last-frame", o->last_frame,
                           "fl2va: the last keyframe, presented with the prompt");
        o->sub->add_option("--size", o->size, "fl2va: the canvas WxH (default: the first keyframe's aspect)");
        o->sub->add_option("--reference", o->references,
                           "ref2va: a reference (repeatable, order kept; as generate --reference)");
        auto* secs =
            o->sub->add_option("--seconds", o->seconds, "ref2va: the generated length clips are cut to");
        o->sub->add_option("--frames", o->frames, "ref2va: the generated frame count (17n+5)")
            ->excludes(secs);
        add_reference_size_options(o->sub, o->reference_image_edge, o->reference_video_edge);
    };
    c.parsed = [o] { return o->sub && o->sub->parsed(); };
    c.run = [o]() -> int {
        if (o->tokens_only) {
            auto dir = model::find_tokenizer_dir(o->model);
            if (!dir.ok()) return report(dir.status());
            auto tok = model::tokenizer::Tokenizer::load(*dir);
            if (!tok.ok()) return report(tok.status());
            auto ids = tok->encode(o->prompt);
            if (!ids.ok()) return report(ids.status().with_context("prompt"));
            const std::string text = nlohmann::json(*ids).dump();
            std::printf("%s\n", text.c_str());
            if (!o->output.empty()) {
                std::ofstream f(o->output, std::ios::binary);
                f << text << '\n';
                if (!f) return report(io_error("cannot write " + o->output));
            }
            return kExitOk;
        }
        if (o->output.empty())
            return report(invalid_argument("encode: --output is required (or --tokens-only)"));
        auto session = DeviceSession::open(o->device);
        if (!session.ok()) return report(session.status());
        const auto t0 = std::chrono::steady_clock::now();
        auto cond = pipeline::TextConditioner::open(
            {.checkpoint_dir = o->model, .ctx = (*session)->context(), .fp32 = o->dtype == "fp32"});
        if (!cond.ok()) return report(cond.status());
        const auto t1 = std::chrono::steady_clock::now();
        if (!o->first_frame.empty() || !o->last_frame.empty() || !o->references.empty())
            return encode_presented(*o, **cond, t0, t1);
        for (const char* flag : {"--size", "--frames", "--seconds"})
            if (o->sub->count(flag))
                return report(invalid_argument(std::string(flag) +
                                               " applies with --first-frame/--last-frame or --reference only "
                                               "(a prompt alone is encoded the same for every geometry)"));
        auto ids = (*cond)->tokenize(o->prompt);
        if (!ids.ok()) return report(ids.status());
        auto emb = (*cond)->embed(*ids);
        if (!emb.ok()) return report(emb.status());
        const auto t2 = std::chrono::steady_clock::now();
        const int64_t L = static_cast<int64_t>(ids->size());
        Tensor id_t = Tensor::host({L}, DType::kI32), tags = Tensor::host({L}, DType::kI32);
        std::memcpy(id_t.data(), ids->data(), ids->size() * sizeof(int32_t));
        for (int64_t i = 0; i < L; ++i) tags.data_as<int32_t>()[i] = pipeline::kTagText;
        Status s = io::write_safetensors(
            o->output, {{"prompt_embeds", *emb}, {"prompt_tags", tags}, {"input_ids", id_t}},
            {{"device", o->device}, {"dtype", o->dtype}, {"encoder", (*cond)->name()}});
        if (!s.ok()) return report(s);
        std::printf("encoded %lld tokens -> [%lld, %lld] %s on %s (load %.2f s, encode %.3f s) -> %s\n",
                    static_cast<long long>(L), static_cast<long long>(emb->dim(0)),
                    static_cast<long long>(emb->dim(1)), o->dtype.c_str(), o->device.c_str(),
                    std::chrono::duration<double>(t1 - t0).count(),
                    std::chrono::duration<double>(t2 - t1).count(), o->output.c_str());
        return kExitOk;
    };
    return c;
}

} // namespace h3::cli
