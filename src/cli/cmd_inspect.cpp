// h3-engine inspect PATH [--json] [--strict]
#include "cli/app.h"
#include "cli/commands.h"
#include "model/inspect_report.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>

namespace h3::cli {

Command make_inspect_command() {
    struct Options {
        std::string path;
        bool json = false;
        bool strict = false;
        CLI::App* sub = nullptr;
    };
    auto o = std::make_shared<Options>();
    Command c;
    c.setup = [o](CLI::App& app) {
        o->sub = app.add_subcommand("inspect",
                                    "List the components and tensors of a checkpoint or safetensors file "
                                    "and check them against the official tensor names");
        o->sub->add_option("path", o->path, "safetensors file, index.json, or checkpoint directory")
            ->required();
        o->sub->add_flag("--json", o->json, "machine-readable output");
        o->sub->add_flag("--strict", o->strict, "exit 3 when tensors are missing, unexpected or mis-shaped");
    };
    c.parsed = [o] { return o->sub && o->sub->parsed(); };
    c.run = [o]() -> int {
        auto r = model::inspect_path(o->path);
        if (!r.ok()) return report(r.status());
        if (o->json)
            std::printf("%s\n", model::to_json(*r).dump(2).c_str());
        else
            std::printf("%s", model::to_text(*r).c_str());
        return (o->strict && !r->ok()) ? kExitBadInput : kExitOk;
    };
    return c;
}

} // namespace h3::cli
