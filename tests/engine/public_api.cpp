// A program outside the tree: it includes <h3/engine.h> alone (installed by `cmake --install --component
// engine`) and links libh3_engine. Usage: public_api CHECKPOINT OUT_DIR — checks an engine option and a
// request field without a checkpoint, opens the checkpoint with layerwise int8 weights, generates a tiny
// clip (latents + WAV + the decoded frames in memory) and prints what it got.
#include <h3/engine.h>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: public_api CHECKPOINT OUT_DIR\n");
        return 2;
    }
    const std::string dir = argv[2];
    // errors carry the field they are about, before anything is read
    h3::Status bad = h3::Engine::check(h3::EngineOptions{.checkpoint = argv[1], .weight_dtype = "int4"});
    if (bad.ok() || bad.field() != "weight_dtype") {
        std::fprintf(stderr, "FAIL: weight_dtype int4 accepted or unnamed: %s\n", bad.to_string().c_str());
        return 1;
    }
    bad = h3::Engine::check(h3::JobRequest{.prompt = "x", .num_inference_steps = 1, .save_latents = "x"});
    if (bad.ok() || bad.field() != "num_inference_steps") {
        std::fprintf(stderr, "FAIL: 1 step accepted or unnamed: %s\n", bad.to_string().c_str());
        return 1;
    }
    auto engine = h3::Engine::open({.checkpoint = argv[1], .residency = "layerwise", .weight_dtype = "int8"});
    if (!engine.ok()) {
        std::fprintf(stderr, "FAIL: open: %s\n", engine.status().to_string().c_str());
        return 1;
    }
    const h3::EngineInfo info = (*engine)->info();
    auto job = (*engine)->build({.prompt = "a red fox in the snow",
                                 .size = "64x32",
                                 .frames = 107,
                                 .num_inference_steps = 3,
                                 .seed = 7,
                                 .output = dir + "/clip.wav",
                                 .save_latents = dir + "/clip.safetensors",
                                 .return_media = true});
    if (!job.ok()) {
        std::fprintf(stderr, "FAIL: build: %s\n", job.status().to_string().c_str());
        return 1;
    }
    int progress_events = 0;
    auto report = (*engine)->run(*job, {.progress = [&](const h3::Progress&) { ++progress_events; }});
    if (!report.ok()) {
        std::fprintf(stderr, "FAIL: run: %s\n", report.status().to_string().c_str());
        return 1;
    }
    const h3::JobReport& r = *report;
    const size_t want_video = static_cast<size_t>(r.frames) * r.width * r.height * 3;
    if (r.video.size() != want_video || r.audio.empty() || r.written.size() != 2 || progress_events == 0) {
        std::fprintf(stderr,
                     "FAIL: report: %zu video bytes (want %zu), %zu audio values, %zu files, %d events\n",
                     r.video.size(), want_video, r.audio.size(), r.written.size(), progress_events);
        return 1;
    }
    std::printf("public_api: %s on %s %s: %s %dx%d, %d frames, %d steps, seed %llu; wrote %s and %s; %s\n",
                info.checkpoint.c_str(), info.device.c_str(), info.dtype.c_str(), r.task.c_str(), r.width,
                r.height, r.frames, r.steps, static_cast<unsigned long long>(r.seed), r.written[0].c_str(),
                r.written[1].c_str(), r.placement.c_str());
    return 0;
}
