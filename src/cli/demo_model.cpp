#include "cli/demo_model.h"

#include <filesystem>

#ifndef H3_DEMO_MODEL_DIR
#error "H3_DEMO_MODEL_DIR must name models/h3-demo in the source tree (src/cli/CMakeLists.txt sets it)"
#endif

namespace h3::cli {

Result<DemoModel> embedded_demo_model() {
    DemoModel m;
    m.dir = H3_DEMO_MODEL_DIR;
    std::error_code ec;
    if (!std::filesystem::is_directory(m.dir, ec))
        return not_found("no --model given, and the embedded demo model is not at " + m.dir +
                         " (this binary was built from a source tree that held it): pass --model DIR");
    H3_ASSIGN_OR_RETURN(auto d, runtime::read_checkpoint_defaults(m.dir));
    if (!d || !d->size || !d->frames)
        return bad_input(m.dir + "/" + runtime::kCheckpointDefaultsFile +
                         ": the demo model must declare its native size and frames");
    m.defaults = std::move(*d);
    return m;
}

} // namespace h3::cli
