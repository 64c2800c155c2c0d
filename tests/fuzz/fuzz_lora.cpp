// libFuzzer entry: any byte string is a candidate LoRA adapter file (safetensors) for the tiny DiT. It is
// read the way --lora and the server's adapter library read one (read_lora_file: the safetensors validation,
// every key layout, alpha / lora_adapter_metadata scaling, fused qkv and fc1 conversions), non-strict with
// the layout's own qkv row order and strict with the per-head order. Refusals must be bad_input statuses that
// name the file; an accepted adapter must fit the DiT exactly (existing, distinct, sorted targets, A [r, in]
// and B [out, r] of the target's shape, owned float host tensors, a finite scale). Anything else is a
// finding.
#include "core/log.h"
#include "fuzz_check.h"
#include "model/lora/lora_file.h"
#include "model/tiny/tiny_checkpoint.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

[[noreturn]] void finding(const std::string& what) {
    std::fprintf(stderr, "fuzz_lora: %s\n", what.c_str());
    std::abort();
}

void check_adapter(const h3::model::LoraAdapter& a, const h3::model::DitConfig& c, const std::string& path) {
    using namespace h3::model;
    if (a.factors.empty()) finding("an accepted adapter has no factors");
    if (a.source != path) finding("the adapter's source is '" + a.source + "', not the file");
    for (size_t i = 0; i < a.factors.size(); ++i) {
        const LoraFactor& f = a.factors[i];
        const std::string name = lora_target_name(f.target);
        if (!lora_target_exists(c, f.target)) finding("target " + name + " is not in the tiny DiT");
        if (i > 0 && !(a.factors[i - 1].target < f.target))
            finding("targets unsorted or repeated at " + name);
        const LoraShape s = lora_target_shape(c, f.target);
        if (!f.a.defined() || !f.b.defined() || f.a.rank() != 2 || f.b.rank() != 2)
            finding(name + ": factors are not 2-D tensors");
        const int64_t r = f.rank();
        if (r < 1 || f.a.dim(1) != s.in || f.b.dim(0) != s.out || f.b.dim(1) != r)
            finding(name + ": A " + f.a.shape().to_string() + " / B " + f.b.shape().to_string() +
                    " do not fit [" + std::to_string(s.out) + ", " + std::to_string(s.in) + "]");
        if (!f.a.device().is_cpu() || !f.b.device().is_cpu() || !f.a.is_contiguous() || !f.b.is_contiguous())
            finding(name + ": factors are not contiguous host tensors");
        if (!h3::dtype_is_float(f.a.dtype()) || !h3::dtype_is_float(f.b.dtype()))
            finding(name + ": factors are not float");
        if (!std::isfinite(f.scale)) finding(name + ": scale is not finite");
    }
    if (a.host_bytes() == 0) finding("an accepted adapter holds no bytes");
    (void)a.summary();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const h3::model::DitConfig config = h3::model::tiny_dit_config();
    static const std::string path = h3::fuzz::scratch_path("lora.safetensors");
    static const bool quiet = h3::set_log_level("error"); // the non-strict read warns about skipped keys
    (void)quiet;
    static const bool verbose = std::getenv("H3_FUZZ_VERBOSE") != nullptr;
    if (!h3::fuzz::write_scratch(path, data, size)) return 0;
    for (const h3::model::LoraReadOptions& opt :
         {h3::model::LoraReadOptions{}, h3::model::LoraReadOptions{true, h3::model::LoraQkvRows::kPerHead}}) {
        auto a = h3::model::read_lora_file(path, config, opt);
        if (verbose) // triage: H3_FUZZ_VERBOSE=1 fuzz_lora FILE prints what each read made of the input
            std::fprintf(stderr, "fuzz_lora (%s): %s\n", opt.strict ? "strict, per-head" : "non-strict",
                         a.ok() ? a->summary().c_str() : a.status().to_string().c_str());
        if (!a.ok()) {
            h3::fuzz::expect_clean(a.status(), {h3::ErrorCode::kBadInput}, "read_lora_file");
            if (a.status().message().find(path) == std::string::npos)
                finding("the refusal does not name the file: " + a.status().to_string());
            continue;
        }
        check_adapter(*a, config, path);
    }
    return 0;
}
