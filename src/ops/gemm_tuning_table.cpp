#include "ops/gemm_tuning_table.h"

#include "core/log.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace h3::ops {

namespace {
constexpr const char* kMagic = "h3-gemm-tuning 1";
} // namespace

GemmTuningTable::GemmTuningTable(std::string path, std::string identity)
    : path_(std::move(path)), identity_(std::move(identity)) {
    if (path_.empty()) return; // memory only
    std::ifstream in(path_);
    if (!in) return; // no file yet
    std::string magic, id;
    if (!std::getline(in, magic) || magic != kMagic || !std::getline(in, id)) {
        H3_LOG_WARN("gemm tuning file {}: not a tuning table; it is rewritten", path_);
        return;
    }
    if (id != identity_) {
        H3_LOG_INFO("gemm tuning file {}: written for {}, not {}; it is rewritten", path_, id, identity_);
        return;
    }
    std::string line;
    std::map<std::pair<std::string, Key>, Choice> read;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        std::istringstream fields(line);
        std::string family;
        Choice c;
        Key key;
        if (!(fields >> family >> c.chosen >> c.candidates) || c.chosen < 0 || c.candidates <= c.chosen) {
            H3_LOG_WARN("gemm tuning file {}: damaged line '{}'; the file is ignored", path_, line);
            return;
        }
        for (int64_t v; fields >> v;) key.push_back(v);
        if (!fields.eof() || key.empty()) {
            H3_LOG_WARN("gemm tuning file {}: damaged line '{}'; the file is ignored", path_, line);
            return;
        }
        read[{family, key}] = c;
    }
    choices_ = std::move(read);
    H3_LOG_INFO("gemm tuning file {}: {} choice(s) for {}", path_, choices_.size(), identity_);
}

std::optional<GemmTuningTable::Choice> GemmTuningTable::find(const std::string& family,
                                                             const Key& key) const {
    std::lock_guard<std::mutex> lk(m_);
    auto it = choices_.find({family, key});
    if (it == choices_.end()) return std::nullopt;
    return it->second;
}

std::optional<GemmTuningTable::Choice> GemmTuningTable::find_near(const std::string& family,
                                                                  const Key& key) const {
    if (auto exact = find(family, key)) return exact;
    if (key.empty() || key[0] <= 0) return std::nullopt;
    std::lock_guard<std::mutex> lk(m_);
    const int64_t m = key[0], tolerance = m / 16;
    std::optional<Choice> best;
    int64_t best_distance = tolerance + 1;
    for (const auto& [k, c] : choices_) {
        if (k.first != family || k.second.size() != key.size() ||
            !std::equal(key.begin() + 1, key.end(), k.second.begin() + 1))
            continue;
        const int64_t distance = k.second[0] > m ? k.second[0] - m : m - k.second[0];
        if (distance < best_distance) best_distance = distance, best = c;
    }
    return best;
}

void GemmTuningTable::record(const std::string& family, const Key& key, Choice choice) {
    std::lock_guard<std::mutex> lk(m_);
    choices_[{family, key}] = choice;
    if (!path_.empty()) save_locked();
}

size_t GemmTuningTable::size() const {
    std::lock_guard<std::mutex> lk(m_);
    return choices_.size();
}

void GemmTuningTable::save_locked() {
    const std::string tmp = path_ + ".tmp." + std::to_string(::getpid());
    bool ok = false;
    {
        std::ofstream out(tmp, std::ios::trunc);
        if (out) {
            out << kMagic << '\n' << identity_ << '\n';
            for (const auto& [k, c] : choices_) {
                out << k.first << ' ' << c.chosen << ' ' << c.candidates;
                for (int64_t v : k.second) out << ' ' << v;
                out << '\n';
            }
            ok = static_cast<bool>(out.flush());
        }
    }
    std::error_code ec;
    if (ok) std::filesystem::rename(tmp, path_, ec);
    if (!ok || ec) {
        std::filesystem::remove(tmp, ec);
        if (!write_failed_)
            H3_LOG_WARN("gemm tuning file {}: cannot be written; choices are kept in memory only", path_);
        write_failed_ = true;
    }
}

} // namespace h3::ops
