#include "serve/wire/model_object.h"

#include <filesystem>

namespace h3::api {

nlohmann::json model_list(const pipeline::JobBuilder& builder) {
    const runtime::CheckpointInfo& info = builder.info();
    std::filesystem::path root(info.root);
    if (root.filename().empty()) root = root.parent_path(); // "models/h3-demo/"
    nlohmann::json m = {{"id", root.filename().string()}, {"object", "model"},
                        {"owned_by", "h3-engine"},        {"root", info.root},
                        {"device", info.device},          {"dtype", info.dtype}};
    // what a request that gives nothing but its prompt gets (random rows stand in for the prompt)
    pipeline::JobInput probe;
    probe.random_prompt_embeds = 1;
    probe.seed = 0;
    if (auto job = builder.build(std::move(probe)); job.ok()) {
        const pipeline::Geometry& g = job->geometry;
        m["defaults"] = {{"size", std::to_string(g.width) + "x" + std::to_string(g.height)},
                         {"frames", g.frames},
                         {"seconds", g.seconds()},
                         {"num_inference_steps", job->steps}};
    } else {
        m["defaults"] = nullptr;
    }
    m["defaults_from"] = info.defaults ? nlohmann::json(info.defaults->path) : nlohmann::json(nullptr);
    const pipeline::JobBuilderOptions& o = builder.options();
    m["limits"] = {{"num_inference_steps", {2, o.max_steps}},
                   {"seconds", {o.geometry.min_seconds, o.geometry.max_seconds}}};
    if (info.defaults && !info.defaults->vocabulary.empty()) m["vocabulary"] = info.defaults->vocabulary;
    return {{"object", "list"}, {"data", nlohmann::json::array({m})}};
}

} // namespace h3::api
