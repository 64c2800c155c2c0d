// h3-bench load (h3-engine bench load) --dir DIR [--config official|FILE] [--blocks N] [--shard-mib M]
// [--rewrite]
//                      [--device cuda|cpu] [--dtype bf16|fp32] [--json]
// Cold start (issue #45): how long a fresh process takes from opening a checkpoint to its first DiT forward,
// against the disk's sequential read rate. Writes once (or again with --rewrite) a random DiT of the
// config's width in the official sharded safetensors layout (DIR/transformer: config.json,
// diffusion_pytorch_model-0000k-of-0000n.safetensors of about --shard-mib each, the index.json with its
// weight_map and total_size) with --blocks of its blocks (the full 50-block DiT is 66 GB in bf16: the rate
// comparison is per byte, so a few blocks on a small disk measure the same thing). Then:
//   sequential read  every shard read front to back in 16 MiB read() calls after its pages were dropped
//                    from the page cache (posix_fadvise DONTNEED after fsync; /proc/sys/vm/drop_caches too
//                    where writable) — what `dd if=shard of=/dev/null bs=16M` measures;
//   cold / warm      this binary again as a child process (load --child): open the checkpoint, load
//                    the DiT onto --device, compute its AdaLN tables and run one forward over a small
//                    synthetic request, timed in the child; the parent times the whole process. Cold drops
//                    the shards' pages first, warm runs right after with them cached.
// JSON: bytes, shards, the read rate, per run the open / load / first-forward seconds, open→first forward,
// the page-cache residency before it, and the ratio of open→first forward to the sequential read of the
// same bytes against the goal (1.3).
#include "bench/commands.h"
#include "io/checkpoint.h"
#include "io/json_file.h"
#include "model/dit/dit_config.h"
#include "model/dit/dit_model.h"
#include "model/dit/dit_random.h"
#include "model/dit/dit_tensors.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <memory>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

extern char** environ;

namespace fs = std::filesystem;

namespace h3::bench {

namespace {

using Clock = std::chrono::steady_clock;
constexpr double kGoalRatio = 1.3;

double since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct LoadBenchOptions {
    CLI::App* sub = nullptr;
    std::string dir, config = "official", device = "cuda", dtype = "bf16";
    int blocks = 2;
    double shard_mib = 4700; // the official shards' size (66 GB in 14)
    bool rewrite = false, json = false, child = false;
};

// Uniform values with the standard deviation model/dit/random_weights uses (1/√fan_in for matrices, norms
// near 1, small biases): finite activations, cheap to make at full width.
Tensor random_tensor(const model::TensorSpec& spec, uint64_t seed) {
    Tensor t = Tensor::host(Shape(spec.shape), DType::kF32);
    const bool bias = spec.name.size() > 5 && spec.name.compare(spec.name.size() - 5, 5, ".bias") == 0;
    const bool norm = spec.shape.size() == 1 && spec.name.find("norm") != std::string::npos && !bias;
    double sd = spec.shape.size() == 2 ? 1.0 / std::sqrt(static_cast<double>(spec.shape[1])) : 0.02;
    const float half = static_cast<float>(sd * std::sqrt(3.0));
    uint64_t s = seed ^ std::hash<std::string>{}(spec.name);
    float* p = t.data_as<float>();
    for (int64_t i = 0; i < t.numel(); ++i) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const float u = static_cast<float>(s >> 40) * 0x1.0p-24f * 2.0f - 1.0f; // [-1, 1)
        p[i] = norm ? 1.0f + 0.05f * u : half * u;
    }
    if (spec.dtype == DType::kF32) return t;
    auto converted = t.to_dtype(spec.dtype);
    H3_CHECK(converted.ok(), converted.status().to_string());
    return *converted;
}

// The DiT config with `blocks` blocks.
Result<model::DitConfig> bench_config(const LoadBenchOptions& o) {
    model::DitConfig c;
    if (o.config != "official") {
        H3_ASSIGN_OR_RETURN(c, model::DitConfig::from_file(o.config));
    }
    if (o.blocks < 1) return invalid_argument("bench load: --blocks must be at least 1");
    c.num_layers = std::min(o.blocks, c.num_layers);
    return c;
}

std::vector<std::string> shard_files(const fs::path& dir) {
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().extension() == ".safetensors") files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    return files;
}

// Writes DIR/transformer in the official layout: tensors in dit_tensor_specs' order, cut into shards of
// about shard_bytes, each made only when written.
Status write_checkpoint(const fs::path& tdir, const model::DitConfig& c, int64_t shard_bytes) {
    std::error_code ec;
    fs::remove_all(tdir, ec);
    fs::create_directories(tdir, ec);
    if (ec) return io_error("bench load: cannot create " + tdir.string() + ": " + ec.message());
    H3_TRY(io::write_json_file((tdir / "config.json").string(), c.to_diffusers_json()));
    std::vector<std::vector<model::TensorSpec>> shards(1);
    int64_t in_shard = 0;
    for (const auto& spec : model::dit_tensor_specs(c, model::DitFormat::kDiffusers)) {
        int64_t bytes = static_cast<int64_t>(dtype_size(spec.dtype));
        for (int64_t d : spec.shape) bytes *= d;
        if (in_shard > 0 && in_shard + bytes > shard_bytes) {
            shards.emplace_back();
            in_shard = 0;
        }
        shards.back().push_back(spec);
        in_shard += bytes;
    }
    H3_TRY(io::write_sharded_safetensors(tdir.string(), "diffusion_pytorch_model",
                                         static_cast<int>(shards.size()),
                                         [&](int s) -> Result<std::vector<io::NamedTensor>> {
                                             std::vector<io::NamedTensor> part;
                                             for (const auto& spec : shards[static_cast<size_t>(s)])
                                                 part.push_back({spec.name, random_tensor(spec, 17)});
                                             return part;
                                         }));
    for (const std::string& f : shard_files(tdir)) { // on the disk before any timing
        const int fd = ::open(f.c_str(), O_RDONLY);
        if (fd < 0) return io_error("bench load: cannot open " + f);
        ::fsync(fd);
        ::close(fd);
    }
    return ok_status();
}

// Drops the files' pages from the page cache (clean pages: they were fsynced).
void drop_cached(const std::vector<std::string>& files) {
    ::sync();
    if (std::ofstream drop("/proc/sys/vm/drop_caches"); drop) drop << "1\n"; // root only; harmless else
    for (const std::string& f : files) {
        const int fd = ::open(f.c_str(), O_RDONLY);
        if (fd < 0) continue;
        ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        ::close(fd);
    }
}

// Fraction of the files' pages in the page cache (mincore over a mapping).
double resident_fraction(const std::vector<std::string>& files) {
    const int64_t page = ::sysconf(_SC_PAGESIZE);
    int64_t pages = 0, resident = 0;
    for (const std::string& f : files) {
        const int fd = ::open(f.c_str(), O_RDONLY);
        if (fd < 0) continue;
        const int64_t size = static_cast<int64_t>(fs::file_size(f));
        if (size > 0) {
            void* m = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_SHARED, fd, 0);
            if (m != MAP_FAILED) {
                std::vector<unsigned char> v(static_cast<size_t>((size + page - 1) / page));
                if (::mincore(m, static_cast<size_t>(size), v.data()) == 0)
                    for (unsigned char b : v) resident += b & 1;
                pages += static_cast<int64_t>(v.size());
                ::munmap(m, static_cast<size_t>(size));
            }
        }
        ::close(fd);
    }
    return pages ? static_cast<double>(resident) / static_cast<double>(pages) : 0.0;
}

// dd's measurement: every file front to back in 16 MiB reads, from a dropped page cache.
Result<nlohmann::json> sequential_read(const std::vector<std::string>& files) {
    drop_cached(files);
    const double before = resident_fraction(files);
    std::vector<char> buf(size_t{16} << 20);
    int64_t bytes = 0;
    const auto t0 = Clock::now();
    for (const std::string& f : files) {
        const int fd = ::open(f.c_str(), O_RDONLY);
        if (fd < 0) return io_error("bench load: cannot open " + f + ": " + std::strerror(errno));
        ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
        while (true) {
            const ssize_t n = ::read(fd, buf.data(), buf.size());
            if (n < 0) {
                ::close(fd);
                return io_error("bench load: reading " + f + ": " + std::strerror(errno));
            }
            if (n == 0) break;
            bytes += n;
        }
        ::close(fd);
    }
    const double s = since(t0);
    return nlohmann::json{{"bytes", bytes},
                          {"seconds", s},
                          {"bytes_per_second", s > 0 ? static_cast<double>(bytes) / s : 0.0},
                          {"page_cache_resident_before", before},
                          {"method", "read() in 16 MiB blocks after POSIX_FADV_DONTNEED (as dd bs=16M)"}};
}

// The child: open → load → AdaLN tables + one forward over a small synthetic request; one JSON line.
int run_child(const LoadBenchOptions& o) {
    const auto t0 = Clock::now();
    auto session = DeviceSession::open(o.device);
    if (!session.ok()) return report(session.status());
    const double device_seconds = since(t0);
    const auto t_open = Clock::now();
    auto ckpt = model::open_dit_checkpoint((fs::path(o.dir) / "transformer").string());
    if (!ckpt.ok()) return report(ckpt.status());
    const double open_seconds = since(t_open);
    model::DitLoadOptions lo;
    lo.device = (*session)->context().device;
    lo.precision = o.dtype == "fp32" ? model::DitPrecision::kFp32 : model::DitPrecision::kBf16;
    auto dit = model::DitModel::load(*ckpt, lo, (*session)->context());
    if (!dit.ok()) return report(dit.status());
    if (Status s = (*session)->synchronize(); !s.ok()) return report(s);
    const double load_seconds = since(t_open) - open_seconds;
    const auto t_fwd = Clock::now();
    const model::DitConfig& c = (*dit)->config();
    const model::SyntheticLayout layout{
        .text = 16, .latent_frames = 2, .latent_h = 4, .latent_w = 4, .audio = 8};
    const auto packed = model::synthetic_inputs(c, layout, 0.3f, 0.55f, 2);
    auto tables = (*dit)->compute_adaln_tables(packed.timesteps);
    if (!tables.ok()) return report(tables.status());
    auto out = (*dit)->forward(packed, &*tables);
    if (!out.ok()) return report(out.status());
    if (Status s = (*session)->synchronize(); !s.ok()) return report(s);
    const double forward_seconds = since(t_fwd);
    const nlohmann::json j = {{"device_seconds", device_seconds},
                              {"open_seconds", open_seconds},
                              {"load_seconds", load_seconds},
                              {"first_forward_seconds", forward_seconds},
                              {"open_to_first_forward_seconds", since(t_open)},
                              {"rows", layout.rows(c)}};
    std::printf("%s\n", j.dump().c_str());
    return kExitOk;
}

// This binary again as `load --child`; its JSON line, and the process's wall seconds.
Result<nlohmann::json> run_fresh_process(const LoadBenchOptions& o) {
    int fds[2];
    if (::pipe(fds) != 0) return io_error("bench load: pipe failed");
    // this process is h3-bench (h3-engine bench execs it): its `load` again
    std::vector<std::string> args = {"h3-bench", "load",   "--child", "--dir", o.dir,
                                     "--device", o.device, "--dtype", o.dtype};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    pid_t pid = 0;
    const auto t0 = Clock::now();
    const int rc = posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(fds[1]);
    if (rc != 0) {
        ::close(fds[0]);
        return io_error("bench load: cannot start the child process: " + std::string(std::strerror(rc)));
    }
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) > 0;) out.append(buf, static_cast<size_t>(n));
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    const double wall = since(t0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return internal_error("bench load: the child process failed (its error is above)");
    nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
    if (j.is_discarded()) return internal_error("bench load: the child printed no JSON: " + out);
    j["process_seconds"] = wall;
    return j;
}

int run_bench(const LoadBenchOptions& o) {
    auto config = bench_config(o);
    if (!config.ok()) return report(config.status());
    const fs::path tdir = fs::path(o.dir) / "transformer";
    nlohmann::json j = {{"bench", "load"},    {"dir", o.dir},     {"blocks", config->num_layers},
                        {"device", o.device}, {"dtype", o.dtype}, {"goal_ratio", kGoalRatio}};
    bool written = false;
    if (o.rewrite || !fs::exists(tdir / "diffusion_pytorch_model.safetensors.index.json")) {
        const auto t0 = Clock::now();
        if (Status s = write_checkpoint(tdir, *config, static_cast<int64_t>(o.shard_mib * 1048576.0));
            !s.ok())
            return report(s);
        j["write_seconds"] = since(t0);
        written = true;
    }
    j["written"] = written;
    const std::vector<std::string> files = shard_files(tdir);
    int64_t bytes = 0;
    for (const std::string& f : files) bytes += static_cast<int64_t>(fs::file_size(f));
    j["shards"] = files.size();
    j["bytes"] = bytes;
    auto seq = sequential_read(files);
    if (!seq.ok()) return report(seq.status());
    j["sequential_read"] = *seq;
    const double rate = seq->at("bytes_per_second").get<double>();
    for (const char* run : {"cold", "warm"}) {
        if (std::string(run) == "cold") drop_cached(files);
        const double before = resident_fraction(files);
        auto r = run_fresh_process(o);
        if (!r.ok()) return report(r.status());
        (*r)["page_cache_resident_before"] = before;
        const double t = r->at("open_to_first_forward_seconds").get<double>();
        const double read_seconds = rate > 0 ? static_cast<double>(bytes) / rate : 0.0;
        (*r)["ratio_to_sequential_read"] = read_seconds > 0 ? t / read_seconds : 0.0;
        (*r)["meets_goal"] = read_seconds > 0 && t / read_seconds <= kGoalRatio;
        j[run] = *r;
    }
    if (o.json) {
        std::printf("%s\n", j.dump(2).c_str());
    } else {
        std::printf("load bench: %s, %d blocks, %lld bytes in %zu shards on %s %s\n", o.dir.c_str(),
                    config->num_layers, static_cast<long long>(bytes), files.size(), o.device.c_str(),
                    o.dtype.c_str());
        std::printf("  sequential read %.1f MB/s\n", rate / 1e6);
        for (const char* run : {"cold", "warm"})
            std::printf(
                "  %s: open→first forward %.3f s (open %.3f, load %.3f, forward %.3f; process %.3f s), "
                "%.2fx the sequential read (goal %.1fx)\n",
                run, j[run]["open_to_first_forward_seconds"].get<double>(),
                j[run]["open_seconds"].get<double>(), j[run]["load_seconds"].get<double>(),
                j[run]["first_forward_seconds"].get<double>(), j[run]["process_seconds"].get<double>(),
                j[run]["ratio_to_sequential_read"].get<double>(), kGoalRatio);
    }
    return kExitOk;
}

} // namespace

Command load_command() {
    auto o = std::make_shared<LoadBenchOptions>();
    Command c;
    c.setup = [o](CLI::App& bench) {
        o->sub =
            bench.add_subcommand("load", "cold start: a fresh process from open to the first DiT forward "
                                         "vs the disk's sequential read rate");
        o->sub->add_option("--dir", o->dir, "where the random checkpoint is written once and read")
            ->required();
        o->sub->add_option("--config", o->config, "official or a transformer config.json")
            ->capture_default_str();
        o->sub->add_option("--blocks", o->blocks, "DiT blocks written (the rate comparison is per byte)")
            ->capture_default_str();
        o->sub->add_option("--shard-mib", o->shard_mib, "shard size (the official: ~4700 MiB)")
            ->check(CLI::PositiveNumber)
            ->capture_default_str();
        o->sub->add_flag("--rewrite", o->rewrite, "write the checkpoint again even if --dir holds one");
        o->sub->add_option("--device", o->device, "cuda | cuda:N | cpu")->capture_default_str();
        o->sub->add_option("--dtype", o->dtype, "bf16 | fp32")
            ->check(CLI::IsMember({"bf16", "fp32"}))
            ->capture_default_str();
        o->sub->add_flag("--json", o->json, "JSON output");
        o->sub->add_flag("--child", o->child, "(internal) the timed fresh process");
    };
    c.parsed = [o] { return o->sub && o->sub->parsed(); };
    c.run = [o]() -> int { return o->child ? run_child(*o) : run_bench(*o); };
    return c;
}

} // namespace h3::bench
