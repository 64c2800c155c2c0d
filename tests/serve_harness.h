// Test harness for `h3-engine serve`: the tiny checkpoint, one server child process on loopback (port from
// its "listening" line, stdout/stderr to files, SIGKILLed when the test ends), and the HTTP helpers the
// server tests share. Include after defining H3_SERVE_WORK_DIR (a directory name under the build tree, one
// per test binary so that ctest -j runs them side by side).
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <spawn.h>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

extern char** environ;

namespace h3::test {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

inline const std::string kBinary = std::string(H3_BINARY_DIR) + "/src/cli/h3-engine";
inline const fs::path kWork = fs::path(H3_BINARY_DIR) / H3_SERVE_WORK_DIR;

inline std::string read_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

inline const fs::path& tiny_model() {
    static const fs::path dir = [] {
        const fs::path d = kWork / "tiny";
        if (!fs::exists(d / "model_index.json")) {
            fs::create_directories(kWork);
            const std::string cmd = kBinary + " make-tiny " + d.string() + " --seed 1 > /dev/null 2>&1";
            EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
        }
        return d;
    }();
    return dir;
}

// One `h3-engine serve` child process. stdout/stderr go to files; the port comes from the
// "serve: listening on http://HOST:PORT" line. `env` entries ("NAME=value") are added to its environment.
// `binary` is h3-engine (run as `h3-engine serve ...`) or a test tool taking the same options
// (tests/tools/serve_with_faults).
class Server {
public:
    Server(const fs::path& output_dir, std::vector<std::string> extra, const std::string& name,
           std::vector<std::string> env = {}, bool expect_up = true, const std::string& binary = kBinary,
           const fs::path& model = {})
        : log_dir_(kWork / ("log_" + name)) {
        fs::create_directories(log_dir_);
        out_ = log_dir_ / "stdout.txt";
        err_ = log_dir_ / "stderr.txt";
        std::vector<std::string> args = {binary};
        if (binary == kBinary) args.push_back("serve");
        const std::vector<std::string> common = {
            "--model",      (model.empty() ? tiny_model() : model).string(),
            "--device",     "cpu",
            "--port",       "0",
            "--output-dir", output_dir.string(),
            "--dtype",      "fp32"};
        args.insert(args.end(), common.begin(), common.end());
        args.insert(args.end(), extra.begin(), extra.end());
        for (size_t i = 0; i + 1 < extra.size(); ++i)
            if (extra[i] == "--api-key") key_ = extra[i + 1];
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        std::vector<std::string> envs;
        for (char** e = environ; *e; ++e) envs.emplace_back(*e);
        envs.insert(envs.end(), env.begin(), env.end());
        std::vector<char*> envp;
        for (auto& e : envs) envp.push_back(e.data());
        envp.push_back(nullptr);
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 1, out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        posix_spawn_file_actions_addopen(&fa, 2, err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        const int rc = posix_spawn(&pid_, binary.c_str(), &fa, nullptr, argv.data(), envp.data());
        posix_spawn_file_actions_destroy(&fa);
        if (rc != 0) {
            pid_ = -1;
            ADD_FAILURE() << "posix_spawn failed: " << rc;
            return;
        }
        const auto deadline = std::chrono::steady_clock::now() + 120s;
        while (std::chrono::steady_clock::now() < deadline) {
            const std::string out = read_file(out_);
            const std::string tag = "serve: listening on http://127.0.0.1:";
            if (auto p = out.find(tag); p != std::string::npos && out.find('\n', p) != std::string::npos) {
                port_ = std::stoi(out.substr(p + tag.size()));
                return;
            }
            int status = 0;
            if (waitpid(pid_, &status, WNOHANG) == pid_) {
                pid_ = -1;
                exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                if (expect_up) ADD_FAILURE() << "server exited early: " << read_file(err_);
                return;
            }
            std::this_thread::sleep_for(50ms);
        }
        ADD_FAILURE() << "server did not report its port: " << read_file(err_);
    }
    ~Server() {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
    }
    int port() const { return port_; }
    pid_t pid() const { return pid_; }
    bool up() const { return port_ > 0; }
    bool alive() const { return pid_ > 0 && ::kill(pid_, 0) == 0; }
    int exit_status() const { return exit_status_; } // when it exited before listening
    std::string stderr_text() const { return read_file(err_); }

    // The server's peak resident memory (VmHWM) in MiB, -1 when it cannot be read.
    long peak_rss_mib() const {
        std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
        std::string line;
        while (std::getline(in, line))
            if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6)) / 1024;
        return -1;
    }

    // with_key: sends the --api-key the server was started with
    httplib::Client client(bool with_key = false) const {
        httplib::Client c("127.0.0.1", port_);
        c.set_read_timeout(300, 0);
        c.set_connection_timeout(10, 0);
        if (with_key) c.set_bearer_token_auth(key_);
        return c;
    }
    void kill9() {
        ::kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
        pid_ = -1;
    }
    // Sends SIGTERM and returns the exit status (−1 on timeout).
    int terminate(std::chrono::seconds timeout = 60s) {
        ::kill(pid_, SIGTERM);
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        while (std::chrono::steady_clock::now() < deadline) {
            int status = 0;
            if (waitpid(pid_, &status, WNOHANG) == pid_) {
                pid_ = -1;
                return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            }
            std::this_thread::sleep_for(20ms);
        }
        return -1;
    }

private:
    fs::path log_dir_, out_, err_;
    pid_t pid_ = -1;
    int port_ = 0;
    int exit_status_ = -1;
    std::string key_;
};

inline json body_json(const httplib::Result& r) {
    if (!r) return json();
    return json::parse(r->body, nullptr, false);
}

inline json submit(httplib::Client& c, const json& body, int expect = 200) {
    auto r = c.Post("/v1/videos", body.dump(), "application/json");
    EXPECT_TRUE(r);
    if (!r) return json();
    EXPECT_EQ(r->status, expect) << r->body;
    return body_json(r);
}

inline json get_video(httplib::Client& c, const std::string& id) {
    auto r = c.Get(("/v1/videos/" + id).c_str());
    EXPECT_TRUE(r);
    return r && r->status == 200 ? body_json(r) : json();
}

// Polls until the job's status is final (or `until` holds); returns the last object and the progress seen.
inline json wait_for(httplib::Client& c, const std::string& id, std::vector<int>* progress = nullptr,
                     std::function<bool(const json&)> until = nullptr, std::chrono::seconds timeout = 300s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    json v;
    while (std::chrono::steady_clock::now() < deadline) {
        v = get_video(c, id);
        if (v.is_null()) return v;
        if (progress) progress->push_back(v["progress"].get<int>());
        const std::string st = v["status"];
        if ((until && until(v)) || st == "completed" || st == "failed" || st == "cancelled") return v;
        std::this_thread::sleep_for(20ms);
    }
    ADD_FAILURE() << "timed out waiting for " << id << ": " << v.dump();
    return v;
}

inline void expect_error(const httplib::Result& r, int status, const std::string& param,
                         const std::string& needle = "") {
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status) << r->body;
    const json j = body_json(r);
    ASSERT_TRUE(j.contains("error")) << r->body;
    if (!param.empty()) {
        EXPECT_EQ(j["error"]["param"], param) << r->body;
    }
    if (!needle.empty()) {
        EXPECT_NE(j["error"]["message"].get<std::string>().find(needle), std::string::npos) << r->body;
    }
}

} // namespace h3::test
