// `h3-engine serve` end to end: a real server process on loopback with the tiny checkpoint on the CPU,
// driven over HTTP. Submit → poll → download (the MP4 read back with libavformat), SSE order, list and
// pagination, cancel and delete while running, sync, every 4xx, 429 when the queue is full, an injected
// fault that fails alone (through the test tool h3-serve-with-faults: a stand-in runner around the
// generator), a bounded load test, restart recovery after kill -9, SIGTERM, TTL expiry; the server's latents
// output byte-identical to `generate --save-latents` for t2va, fl2va and ref2va, and a warm server that
// leases its resident decoders again without reading them (h3_component_loads_total); a tiny FastH3 job with
// `attention` given and defaulted (the sidecar's VSA and rungs) gives generate's latents.
#include "core/status.h"
#include "core/tensor.h"
#include "io/safetensors.h"
#include "media_probe.h"

#include <gtest/gtest.h>

#ifdef H3_WITH_HTTP_SERVER

#define H3_SERVE_WORK_DIR "test_serve"
#include "serve_harness.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <spawn.h>
#include <sstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using namespace h3::test;

namespace {

const std::string kFaultBinary = std::string(H3_BINARY_DIR) + "/tests/h3-serve-with-faults";
const std::string kKey = "test-key-123";
const std::string kFaultPrompt = "INJECT FAULT";

// The smallest request the geometry allows: 64x32, 4 s (107 frames), 2 forwards.
json tiny_request(const std::string& prompt = "a red fox runs through snow", int steps = 3) {
    return {
        {"prompt", prompt}, {"size", "64x32"}, {"seconds", 4}, {"seed", 7}, {"num_inference_steps", steps}};
}

// A request that runs long enough to be caught while running (many steps of the tiny model).
json slow_request() {
    return tiny_request("a slow one", 400);
}

bool running_and_denoising(const json& v) {
    return v["status"] == "in_progress" && v["progress"].get<int>() > 5;
}

// The PNG test image's bytes.
std::string png_bytes() {
    return read_file(fs::path(H3_SOURCE_DIR) / "tests/data/images/png_rgb.png");
}

// 2.5 s of mono PCM16 at 8 kHz: a 44-byte header then a sine.
std::string sine_wav() {
    std::string wav;
    auto put = [&](uint32_t v, int bytes) {
        for (int i = 0; i < bytes; ++i) wav.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    };
    const uint32_t n = 20000;
    wav += "RIFF";
    put(36 + 2 * n, 4);
    wav += "WAVEfmt ";
    put(16, 4), put(1, 2), put(1, 2), put(8000, 4), put(16000, 4), put(2, 2), put(16, 2);
    wav += "data";
    put(2 * n, 4);
    for (uint32_t i = 0; i < n; ++i)
        put(static_cast<uint16_t>(static_cast<int16_t>(8000 * std::sin(0.05 * i))), 2);
    return wav;
}

void check_mp4(const std::string& bytes, const std::string& name) {
    const fs::path p = kWork / name;
    std::ofstream(p, std::ios::binary) << bytes;
#ifdef H3_WITH_FFMPEG
    const h3::test::MediaProbe m = h3::test::probe_media(p.string());
    ASSERT_TRUE(m.opened) << m.error;
    EXPECT_EQ(m.streams, 2u);
    EXPECT_EQ(m.video_codec, AV_CODEC_ID_H264);
    EXPECT_EQ(m.audio_codec, AV_CODEC_ID_AAC);
    EXPECT_EQ(m.width, 64);
    EXPECT_EQ(m.height, 32);
    EXPECT_EQ(m.fps, 24.0);
    EXPECT_EQ(m.decoded_frames, 107);
    EXPECT_EQ(m.sample_rate, 32000);
    EXPECT_EQ(m.channels, 2);
#else
    EXPECT_EQ(bytes.substr(4, 4), "ftyp");
#endif
}

// ---------------------------------------------------------------------------------------------------------
// One server shared by the API tests (declaration order): key required, queue of 3, fault injection.
class ServeApi : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        fs::remove_all(kWork / "api_out");
        server_ = new Server(kWork / "api_out",
                             {"--api-key", kKey, "--max-queue", "3", "--max-body-bytes", "4096", "--ttl", "0",
                              "--fault-inject-prompt", kFaultPrompt},
                             "api", {}, true, kFaultBinary);
    }
    static void TearDownTestSuite() {
        delete server_;
        server_ = nullptr;
    }
    void SetUp() override { ASSERT_TRUE(server_ && server_->up()); }
    static Server* server_;
};
Server* ServeApi::server_ = nullptr;

TEST_F(ServeApi, HealthAndAuth) {
    auto open = server_->client(false);
    auto r = open.Get("/health");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(body_json(r)["status"], "ok");
    expect_error(open.Get("/metrics"), 401, "", "missing API key");
    expect_error(open.Get("/v1/videos"), 401, "");
    expect_error(open.Post("/v1/videos", tiny_request().dump(), "application/json"), 401, "");
    httplib::Client wrong("127.0.0.1", server_->port());
    wrong.set_bearer_token_auth("nope");
    expect_error(wrong.Get("/v1/videos"), 401, "", "wrong API key");
    auto c = server_->client(true);
    r = c.Get("/v1/videos");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(body_json(r)["object"], "list");
}

TEST_F(ServeApi, BadRequestsNameTheField) {
    auto c = server_->client(true);
    const auto post = [&](const std::string& body) { return c.Post("/v1/videos", body, "application/json"); };
    const auto with = [](const char* k, json v) {
        json j = tiny_request();
        j[k] = v;
        return j.dump();
    };
    expect_error(post("{not json"), 400, "body", "not valid JSON");
    expect_error(post("[1,2]"), 400, "body");
    expect_error(post(with("foo", 1)), 400, "foo", "unknown field");
    expect_error(post(with("prompt_embeds", "x.safetensors")), 400, "prompt_embeds", "not accepted");
    expect_error(post(json{{"size", "64x32"}}.dump()), 400, "prompt", "required");
    expect_error(post(with("prompt", 5)), 400, "prompt", "string");
    expect_error(post(with("size", "100x64")), 400, "size", "multiple of 32");
    expect_error(post(with("size", "big")), 400, "size", "1344x768");
    expect_error(post(with("seconds", 2)), 400, "seconds");
    expect_error(post(with("seconds", "soon")), 400, "seconds");
    expect_error(post(with("seed", -1)), 400, "seed");
    expect_error(post(with("num_inference_steps", 1)), 400, "num_inference_steps");
    expect_error(post(with("quality", "ultra")), 400, "quality", "lossless or high");
    expect_error(post(with("output_format", "avi")), 400, "output_format");
    expect_error(post(with("cache", json{{"dbcache", {{"foo", 1}}}})), 400, "cache", "foo");
    {
        json j = tiny_request();
        j["cache"] = "dbcache";
        j["quality"] = "high";
        expect_error(post(j.dump()), 400, "cache", "not both");
    }
    // checked against the checkpoint: the refresh step lies outside a 2-forward schedule
    expect_error(post(with("cache", json{{"dbcache", {{"Fn", 1}, {"refresh", 8}}}})), 400, "cache",
                 "outside the request's schedule");
    // body over --max-body-bytes
    expect_error(post(with("prompt", std::string(8000, 'a'))), 413, "body");
    // unknown ids and routes
    expect_error(c.Get("/v1/videos/video_00000000000000000000000000000000"), 404, "id");
    expect_error(c.Get("/v1/videos/nonsense"), 404, "id");
    expect_error(c.Get("/v1/videos/video_00000000000000000000000000000000/content"), 404, "id");
    expect_error(c.Delete("/v1/videos/video_00000000000000000000000000000000"), 404, "id");
    expect_error(c.Get("/v1/nothing"), 404, "");
    expect_error(c.Get("/v1/videos?limit=0"), 400, "limit");
    expect_error(c.Get("/v1/videos?order=up"), 400, "order");
    expect_error(c.Get("/v1/videos?after=video_00000000000000000000000000000000"), 400, "after");
}

TEST_F(ServeApi, SubmitPollDownload) {
    auto c = server_->client(true);
    const json v = submit(c, tiny_request());
    ASSERT_TRUE(v.contains("id"));
    const std::string id = v["id"];
    EXPECT_EQ(id.rfind("video_", 0), 0u);
    EXPECT_EQ(v["object"], "video");
    EXPECT_TRUE(v["status"] == "queued" || v["status"] == "in_progress");
    EXPECT_EQ(v["size"], "64x32");
    EXPECT_EQ(v["seconds"], "4.458");
    EXPECT_GT(v["created_at"].get<int64_t>(), 0);
    EXPECT_TRUE(v["completed_at"].is_null());
    EXPECT_TRUE(v["error"].is_null());

    std::vector<int> progress;
    const json done = wait_for(c, id, &progress);
    ASSERT_EQ(done["status"], "completed") << done.dump();
    EXPECT_EQ(done["progress"], 100);
    EXPECT_GE(done["completed_at"].get<int64_t>(), done["created_at"].get<int64_t>());
    for (size_t i = 1; i < progress.size(); ++i) EXPECT_LE(progress[i - 1], progress[i]);
    const json& m = done["metrics"];
    EXPECT_EQ(m["dit_calls"], 2);
    EXPECT_EQ(m["steps"], 2);
    EXPECT_GT(m["useful_flops"].get<double>(), 0);
    EXPECT_TRUE(m.contains("encode_seconds") && m.contains("decode_seconds") && m.contains("mux_seconds"));
    // the job object names the kernels the job ran (issue #45): on the server's CPU, the CPU ones
    EXPECT_GT(m["kernels"]["denoise"]["dense_attention"].value("cpu", 0), 0) << m.dump();
    EXPECT_TRUE(m["fallbacks"].is_array() && m["fallbacks"].empty()) << m.dump();

    auto r = c.Get(("/v1/videos/" + id + "/content").c_str());
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200);
    EXPECT_EQ(r->get_header_value("Content-Type"), "video/mp4");
    EXPECT_EQ(r->get_header_value("Content-Length"), std::to_string(r->body.size()));
    EXPECT_GT(r->body.size(), 1000u);
    check_mp4(r->body, "submit.mp4");
    // the file on disk is what was sent
    EXPECT_EQ(read_file(kWork / "api_out" / id / "video.mp4"), r->body);

    r = c.Get(("/v1/videos/" + id + "/content?variant=audio").c_str());
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200);
    EXPECT_EQ(r->get_header_value("Content-Type"), "audio/wav");
    EXPECT_EQ(r->get_header_value("Content-Length"), std::to_string(r->body.size()));
    EXPECT_EQ(r->body.substr(0, 4), "RIFF");
    expect_error(c.Get(("/v1/videos/" + id + "/content?variant=x").c_str()), 400, "variant");
}

TEST_F(ServeApi, EventsArriveInOrder) {
    auto c = server_->client(true);
    // a slow job holds the worker so that the stream starts while the job is still queued
    const std::string blocker = submit(c, slow_request())["id"];
    wait_for(c, blocker, nullptr, running_and_denoising);
    const std::string id = submit(c, tiny_request("events", 4))["id"];
    std::string stream;
    auto events = server_->client(true);
    httplib::Result r{nullptr, httplib::Error::Unknown};
    std::atomic<bool> started{false};
    std::thread reader([&] {
        r = events.Get(("/v1/videos/" + id + "/events").c_str(), [&](const char* data, size_t n) {
            stream.append(data, n);
            started = true;
            return true;
        });
    });
    for (int i = 0; i < 600 && !started; ++i) std::this_thread::sleep_for(50ms);
    EXPECT_TRUE(started);
    auto cancel = c.Post(("/v1/videos/" + blocker + "/cancel").c_str(), "", "application/json");
    ASSERT_TRUE(cancel);
    EXPECT_EQ(cancel->status, 200);
    reader.join();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
    // parse "id: N\nevent: E\ndata: J\n\n" blocks
    std::vector<std::pair<std::string, json>> evs;
    std::vector<uint64_t> ids;
    std::istringstream in(stream);
    std::string line, event;
    while (std::getline(in, line)) {
        if (line.rfind("id: ", 0) == 0) ids.push_back(std::stoull(line.substr(4)));
        if (line.rfind("event: ", 0) == 0) event = line.substr(7);
        if (line.rfind("data: ", 0) == 0) evs.emplace_back(event, json::parse(line.substr(6)));
    }
    ASSERT_GE(evs.size(), 3u) << stream;
    EXPECT_EQ(evs.front().second["status"], "queued") << stream;
    for (size_t i = 1; i < ids.size(); ++i) EXPECT_LT(ids[i - 1], ids[i]);
    int last = -1, last_step = 0;
    for (size_t i = 0; i + 1 < evs.size(); ++i) {
        EXPECT_EQ(evs[i].first, "progress");
        const int p = evs[i].second["progress"];
        EXPECT_GE(p, last);
        last = p;
        if (evs[i].second.contains("step")) {
            EXPECT_GE(evs[i].second["step"].get<int>(), last_step);
            last_step = evs[i].second["step"];
        }
    }
    EXPECT_EQ(last_step, 3) << stream;
    EXPECT_EQ(evs.back().first, "done");
    EXPECT_EQ(evs.back().second["status"], "completed");
    EXPECT_EQ(evs.back().second["progress"], 100);
    // a finished job's stream is its final event alone
    stream.clear();
    r = events.Get(("/v1/videos/" + id + "/events").c_str(), [&](const char* data, size_t n) {
        stream.append(data, n);
        return true;
    });
    ASSERT_TRUE(r);
    EXPECT_NE(stream.find("event: done"), std::string::npos);
    EXPECT_EQ(stream.find("event: progress"), std::string::npos);
}

TEST_F(ServeApi, InjectedFaultFailsAlone) {
    auto c = server_->client(true);
    const std::string bad = submit(c, tiny_request(kFaultPrompt))["id"];
    const std::string good = submit(c, tiny_request("after the fault"))["id"];
    const json b = wait_for(c, bad);
    EXPECT_EQ(b["status"], "failed");
    EXPECT_EQ(b["error"]["code"], "out_of_memory");
    EXPECT_NE(b["error"]["message"].get<std::string>().find("injected"), std::string::npos);
    expect_error(c.Get(("/v1/videos/" + bad + "/content").c_str()), 409, "id", "failed");
    EXPECT_FALSE(fs::exists(kWork / "api_out" / bad / "video.mp4"));
    EXPECT_FALSE(fs::exists(kWork / "api_out" / bad / "partial.video.mp4"));
    const json g = wait_for(c, good);
    EXPECT_EQ(g["status"], "completed") << g.dump();
}

TEST_F(ServeApi, CancelAndDeleteWhileRunning) {
    auto c = server_->client(true);
    // cancel: the record stays, status cancelled
    const std::string a = submit(c, slow_request())["id"];
    json v = wait_for(c, a, nullptr, running_and_denoising);
    ASSERT_EQ(v["status"], "in_progress") << v.dump();
    auto r = c.Post(("/v1/videos/" + a + "/cancel").c_str(), "", "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    v = wait_for(c, a, nullptr, nullptr, 60s);
    EXPECT_EQ(v["status"], "cancelled");
    EXPECT_EQ(v["error"]["code"], "cancelled");
    expect_error(c.Post(("/v1/videos/" + a + "/cancel").c_str(), "", "application/json"), 409, "id");
    expect_error(c.Get(("/v1/videos/" + a + "/content").c_str()), 409, "id", "cancelled");

    // delete while running: gone at once, its directory once the worker stops
    const std::string b = submit(c, slow_request())["id"];
    v = wait_for(c, b, nullptr, running_and_denoising);
    ASSERT_EQ(v["status"], "in_progress") << v.dump();
    r = c.Delete(("/v1/videos/" + b).c_str());
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(body_json(r), (json{{"id", b}, {"object", "video.deleted"}, {"deleted", true}}));
    expect_error(c.Get(("/v1/videos/" + b).c_str()), 404, "id");
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (fs::exists(kWork / "api_out" / b) && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(50ms);
    EXPECT_FALSE(fs::exists(kWork / "api_out" / b));

    // delete a finished job
    r = c.Delete(("/v1/videos/" + a).c_str());
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_FALSE(fs::exists(kWork / "api_out" / a));
    expect_error(c.Delete(("/v1/videos/" + a).c_str()), 404, "id");

    // the worker is free again: a normal job completes
    const json n = wait_for(c, submit(c, tiny_request("after cancel"))["id"]);
    EXPECT_EQ(n["status"], "completed");
}

TEST_F(ServeApi, QueueFullGives429) {
    auto c = server_->client(true);
    const std::string running = submit(c, slow_request())["id"];
    wait_for(c, running, nullptr, running_and_denoising);
    std::vector<std::string> queued;
    for (int i = 0; i < 3; ++i) queued.push_back(submit(c, slow_request())["id"]);
    auto r = c.Post("/v1/videos", slow_request().dump(), "application/json");
    expect_error(r, 429, "", "queue is full");
    ASSERT_TRUE(r);
    EXPECT_FALSE(r->get_header_value("Retry-After").empty());
    EXPECT_GE(std::stoi(r->get_header_value("Retry-After")), 1);
    // sync is refused the same way
    expect_error(c.Post("/v1/videos/sync", tiny_request().dump(), "application/json"), 429, "");
    // cancelling a queued job frees its slot at once
    for (const auto& id : queued) {
        auto d = c.Delete(("/v1/videos/" + id).c_str());
        ASSERT_TRUE(d);
        EXPECT_EQ(d->status, 200);
    }
    auto d = c.Delete(("/v1/videos/" + running).c_str());
    ASSERT_TRUE(d);
    EXPECT_EQ(d->status, 200);
    auto h = c.Get("/health");
    ASSERT_TRUE(h);
    EXPECT_EQ(body_json(h)["queue_depth"], 0);
}

TEST_F(ServeApi, SyncReturnsTheFile) {
    auto c = server_->client(true);
    auto r = c.Post("/v1/videos/sync", tiny_request("sync").dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(r->get_header_value("Content-Type"), "video/mp4");
    EXPECT_EQ(r->get_header_value("Content-Length"), std::to_string(r->body.size()));
    check_mp4(r->body, "sync.mp4");
    const std::string id = r->get_header_value("X-Video-Id");
    EXPECT_EQ(get_video(c, id)["status"], "completed");

    json wav = tiny_request("sync wav");
    wav["output_format"] = "wav";
    r = c.Post("/v1/videos/sync", wav.dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(r->get_header_value("Content-Type"), "audio/wav");
    EXPECT_EQ(r->body.substr(0, 4), "RIFF");
    const std::string wid = r->get_header_value("X-Video-Id");
    EXPECT_FALSE(fs::exists(kWork / "api_out" / wid / "video.mp4"));
    for (const char* variant : {"", "?variant=audio"}) { // a WAV job's content is its audio
        r = c.Get(("/v1/videos/" + wid + "/content" + variant).c_str());
        ASSERT_TRUE(r);
        EXPECT_EQ(r->status, 200);
        EXPECT_EQ(r->get_header_value("Content-Type"), "audio/wav");
    }

    // a failing sync request reports the error
    r = c.Post("/v1/videos/sync", tiny_request(kFaultPrompt).dump(), "application/json");
    expect_error(r, 503, "", "injected");
}

TEST_F(ServeApi, MultipartFormLikeTheOpenAiSdk) {
    auto c = server_->client(true);
    httplib::MultipartFormDataItems items = {
        {"prompt", "a form post", "", ""}, {"model", "minimax-h3", "", ""},      {"size", "64x32", "", ""},
        {"seconds", "4", "", ""},          {"num_inference_steps", "3", "", ""}, {"seed", "11", "", ""}};
    auto r = c.Post("/v1/videos", items);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json v = body_json(r);
    EXPECT_EQ(v["seed"], 11);
    EXPECT_EQ(wait_for(c, v["id"])["status"], "completed");
    httplib::MultipartFormDataItems with_file = {{"prompt", "x", "", ""},
                                                 {"input_reference", "\x89PNG", "a.png", "image/png"}};
    expect_error(c.Post("/v1/videos", with_file), 400, "input_reference", "first_frame and last_frame");
}

TEST_F(ServeApi, MultipartKeyframeUpload) {
    // fl2va: a first_frame image part (bytes, never a path) runs through the tiny model's VAE encoder and
    // vision tower; a part that is not an image is a 400 naming it.
    std::ifstream in(std::string(H3_SOURCE_DIR) + "/tests/data/images/png_rgb.png", std::ios::binary);
    const std::string png((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_GT(png.size(), 100u);
    auto c = server_->client(true);
    httplib::MultipartFormDataItems items = {{"prompt", "a keyframe", "", ""},
                                             {"size", "64x32", "", ""},
                                             {"seconds", "4", "", ""},
                                             {"num_inference_steps", "3", "", ""},
                                             {"seed", "5", "", ""},
                                             {"first_frame", png, "first.png", "image/png"}};
    auto r = c.Post("/v1/videos", items);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json v = wait_for(c, body_json(r)["id"]);
    EXPECT_EQ(v["status"], "completed") << v.dump();
    EXPECT_EQ(v["size"], "64x32");
    EXPECT_GT(v["metrics"].value("keyframe_seconds", 0.0), 0.0) << v.dump(); // the keyframe was encoded
    httplib::MultipartFormDataItems bad = {{"prompt", "x", "", ""},
                                           {"last_frame", "/etc/passwd", "b.png", "image/png"}};
    expect_error(c.Post("/v1/videos", bad), 400, "last_frame", "last_frame");
}

TEST_F(ServeApi, ListNewestFirstAndPaginated) {
    auto c = server_->client(true);
    // three more records, cheaply: cancelled jobs stay listed
    for (int i = 0; i < 3; ++i) {
        const std::string id = submit(c, slow_request())["id"];
        auto r = c.Post(("/v1/videos/" + id + "/cancel").c_str(), "", "application/json");
        ASSERT_TRUE(r);
        EXPECT_EQ(r->status, 200) << r->body;
    }
    auto r = c.Get("/v1/videos?limit=100");
    ASSERT_TRUE(r);
    const json all = body_json(r);
    ASSERT_GE(all["data"].size(), 3u);
    std::vector<std::string> ids;
    int64_t prev = INT64_MAX;
    for (const auto& v : all["data"]) {
        ids.push_back(v["id"]);
        EXPECT_LE(v["created_at"].get<int64_t>(), prev);
        prev = v["created_at"];
    }
    // pages of 2 walk the same order without duplicates
    std::vector<std::string> walked;
    std::string after;
    for (int guard = 0; guard < 100; ++guard) {
        const std::string url = "/v1/videos?limit=2" + (after.empty() ? "" : "&after=" + after);
        const json page = body_json(c.Get(url.c_str()));
        for (const auto& v : page["data"]) walked.push_back(v["id"]);
        if (!page["has_more"].get<bool>()) break;
        after = page["last_id"];
    }
    EXPECT_EQ(walked, ids);
    const json asc = body_json(c.Get("/v1/videos?limit=100&order=asc"));
    std::vector<std::string> rev;
    for (const auto& v : asc["data"]) rev.push_back(v["id"]);
    std::reverse(rev.begin(), rev.end());
    EXPECT_EQ(rev, ids);
}

TEST_F(ServeApi, PrometheusMetrics) {
    auto c = server_->client(true);
    auto r = c.Get("/metrics");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200);
    EXPECT_NE(r->get_header_value("Content-Type").find("text/plain"), std::string::npos);
    const std::string& t = r->body;
    for (const char* needle :
         {"h3_requests_total{status=\"completed\"}", "h3_requests_total{status=\"failed\"}",
          "h3_requests_total{status=\"cancelled\"}", "h3_requests_rejected_total{reason=\"queue_full\"}",
          "h3_queue_depth 0", "h3_stage_seconds_bucket{stage=\"denoise\",le=\"+Inf\"}",
          "h3_stage_seconds_count{stage=\"encode\"}", "h3_stage_seconds_sum{stage=\"mux\"}",
          "h3_dit_useful_tflops_per_second", "h3_cache_hits_total", "h3_gpu_memory_bytes 0"})
        EXPECT_NE(t.find(needle), std::string::npos) << needle << "\n" << t;
    // the exact counts are checked by the load test
}

// ---------------------------------------------------------------------------------------------------------
TEST(ServeLoad, BoundedQueueNeverLosesAJob) {
    fs::remove_all(kWork / "load_out");
    Server server(kWork / "load_out", {"--max-queue", "8"}, "load");
    ASSERT_TRUE(server.up());
    std::mutex mu;
    std::vector<std::string> accepted;
    std::atomic<int> rejected{0}, other{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t)
        threads.emplace_back([&, t] {
            auto c = server.client();
            for (int i = 0; i < 8; ++i) {
                json rq = tiny_request("load " + std::to_string(t) + "/" + std::to_string(i), 2);
                auto r = c.Post("/v1/videos", rq.dump(), "application/json");
                if (r && r->status == 200) {
                    std::lock_guard<std::mutex> lock(mu);
                    accepted.push_back(body_json(r)["id"]);
                } else if (r && r->status == 429 && !r->get_header_value("Retry-After").empty()) {
                    ++rejected;
                } else {
                    ++other;
                }
                std::this_thread::sleep_for(std::chrono::milliseconds(5 * t));
            }
        });
    for (auto& th : threads) th.join();
    EXPECT_EQ(other.load(), 0);
    EXPECT_EQ(accepted.size() + rejected.load(), 64u);
    EXPECT_GE(accepted.size(), 8u);
    EXPECT_GE(rejected.load(), 1);
    EXPECT_EQ(std::set<std::string>(accepted.begin(), accepted.end()).size(), accepted.size());
    auto c = server.client();
    auto h = c.Get("/health");
    ASSERT_TRUE(h);
    EXPECT_EQ(h->status, 200);
    for (const auto& id : accepted) EXPECT_EQ(wait_for(c, id)["status"], "completed") << id;
    const json list = body_json(c.Get("/v1/videos?limit=100"));
    std::set<std::string> listed;
    for (const auto& v : list["data"]) listed.insert(v["id"].get<std::string>());
    EXPECT_EQ(listed, std::set<std::string>(accepted.begin(), accepted.end()));
    const std::string metrics = c.Get("/metrics")->body;
    EXPECT_NE(metrics.find("h3_requests_total{status=\"completed\"} " + std::to_string(accepted.size())),
              std::string::npos)
        << metrics;
    EXPECT_NE(
        metrics.find("h3_requests_rejected_total{reason=\"queue_full\"} " + std::to_string(rejected.load())),
        std::string::npos)
        << metrics;
    h = c.Get("/health");
    ASSERT_TRUE(h);
    EXPECT_EQ(h->status, 200);
    EXPECT_EQ(server.terminate(), 0);
}

// ---------------------------------------------------------------------------------------------------------
TEST(ServeRestart, KillKeepsCompletedAndFailsInterrupted) {
    const fs::path out = kWork / "restart_out";
    fs::remove_all(out);
    std::string done_id, running_id, queued_id;
    {
        Server server(out, {}, "restart1");
        ASSERT_TRUE(server.up());
        auto c = server.client();
        done_id = submit(c, tiny_request("kept"))["id"];
        ASSERT_EQ(wait_for(c, done_id)["status"], "completed");
        running_id = submit(c, slow_request())["id"];
        queued_id = submit(c, slow_request())["id"];
        ASSERT_EQ(wait_for(c, running_id, nullptr, running_and_denoising)["status"], "in_progress");
        server.kill9();
    }
    const std::string mp4_before = read_file(out / done_id / "video.mp4");
    {
        // restarted on the same directory, with the text encoder loaded per job
        Server server(out, {"--text-encoder", "per-job"}, "restart2");
        ASSERT_TRUE(server.up());
        EXPECT_NE(server.stderr_text().find("3 job(s) on record, 2 interrupted"), std::string::npos)
            << server.stderr_text();
        auto c = server.client();
        const json list = body_json(c.Get("/v1/videos"));
        ASSERT_EQ(list["data"].size(), 3u);
        EXPECT_EQ(list["data"][0]["id"], queued_id);
        EXPECT_EQ(list["data"][1]["id"], running_id);
        EXPECT_EQ(list["data"][2]["id"], done_id);
        const json d = get_video(c, done_id);
        EXPECT_EQ(d["status"], "completed");
        EXPECT_EQ(d["metrics"]["dit_calls"], 2);
        auto r = c.Get(("/v1/videos/" + done_id + "/content").c_str());
        ASSERT_TRUE(r);
        ASSERT_EQ(r->status, 200);
        EXPECT_EQ(r->body, mp4_before);
        check_mp4(r->body, "restart.mp4");
        for (const auto& id : {running_id, queued_id}) {
            const json v = get_video(c, id);
            EXPECT_EQ(v["status"], "failed");
            EXPECT_EQ(v["error"]["code"], "interrupted");
            EXPECT_NE(v["error"]["message"].get<std::string>().find("server stopped"), std::string::npos);
        }
        EXPECT_NE(get_video(c, running_id)["error"]["message"].get<std::string>().find("in_progress"),
                  std::string::npos);
        EXPECT_FALSE(fs::exists(out / running_id / "partial.video.mp4"));
        // the restarted server works (per-job text encoder)
        EXPECT_EQ(wait_for(c, submit(c, tiny_request("after restart"))["id"])["status"], "completed");

        // SIGTERM (on-term cancel): the running job fails with the reason, the queued one too, exit 0
        const std::string r1 = submit(c, slow_request())["id"];
        const std::string q1 = submit(c, slow_request())["id"];
        wait_for(c, r1, nullptr, running_and_denoising);
        EXPECT_EQ(server.terminate(), 0) << server.stderr_text();
        for (const auto& id : {r1, q1}) {
            const json rec = json::parse(read_file(out / id / "job.json"));
            EXPECT_EQ(rec["status"], "failed") << id;
            EXPECT_EQ(rec["error"]["code"], "server_shutdown") << id;
        }
    }
    {
        // --on-term finish: the running job completes before the process exits
        Server server(out, {"--on-term", "finish"}, "restart3");
        ASSERT_TRUE(server.up());
        auto c = server.client();
        const std::string id = submit(c, tiny_request("finish me", 6))["id"];
        wait_for(c, id, nullptr, [](const json& v) { return v["status"] != "queued"; });
        EXPECT_EQ(server.terminate(), 0) << server.stderr_text();
        const json rec = json::parse(read_file(out / id / "job.json"));
        EXPECT_EQ(rec["status"], "completed");
        EXPECT_TRUE(fs::exists(out / id / "video.mp4"));
    }
}

TEST(ServeRef2va, MultipartReferences) {
    // ref2va over multipart: repeated `reference` parts (bytes, kind by content, upload order kept) are
    // checked against the rules (400 naming `reference`) and run on the tiny Ref2VA DiT at reduced reference
    // sizes.
    fs::remove_all(kWork / "ref_out");
    Server server(
        kWork / "ref_out",
        {"--max-body-bytes", "8000000", "--reference-image-edge", "64", "--reference-video-edge", "32"},
        "ref2va");
    ASSERT_TRUE(server.up());
    const std::string png = png_bytes(), wav = sine_wav();
    auto c = server.client();
    httplib::MultipartFormDataItems items = {{"prompt", "a referenced ball", "", ""},
                                             {"size", "64x32", "", ""},
                                             {"seconds", "4", "", ""},
                                             {"num_inference_steps", "3", "", ""},
                                             {"seed", "5", "", ""},
                                             {"reference", png, "subject.png", "image/png"},
                                             {"reference", wav, "voice.wav", "audio/wav"}};
    auto r = c.Post("/v1/videos", items);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json v = wait_for(c, body_json(r)["id"]);
    EXPECT_EQ(v["status"], "completed") << v.dump();
    EXPECT_GT(v["metrics"].value("reference_seconds", 0.0), 0.0) << v.dump();
    std::ifstream rec(kWork / "ref_out" / v["id"].get<std::string>() / "job.json");
    const json record = json::parse(rec);
    ASSERT_TRUE(record.dump().find("reference 2: audio, 2.50 s") != std::string::npos) << record.dump();

    httplib::MultipartFormDataItems alone = {{"prompt", "x", "", ""},
                                             {"reference", wav, "voice.wav", "audio/wav"}};
    expect_error(c.Post("/v1/videos", alone), 400, "reference", "cannot be used alone");
    httplib::MultipartFormDataItems junk = {{"prompt", "x", "", ""},
                                            {"reference", png, "subject.png", "image/png"},
                                            {"reference", "neither image nor media", "x.bin", ""}};
    expect_error(c.Post("/v1/videos", junk), 400, "reference", "reference 2 (x.bin)");
    httplib::MultipartFormDataItems both = {{"prompt", "x", "", ""},
                                            {"first_frame", png, "first.png", "image/png"},
                                            {"reference", png, "subject.png", "image/png"}};
    expect_error(c.Post("/v1/videos", both), 400, "reference", "cannot be combined");
    // a t2va job after the ref2va one runs on the FL2VA DiT again (the engine swaps back)
    httplib::MultipartFormDataItems t2va = {{"prompt", "no references", "", ""},
                                            {"size", "64x32", "", ""},
                                            {"seconds", "4", "", ""},
                                            {"num_inference_steps", "3", "", ""}};
    r = c.Post("/v1/videos", t2va);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(wait_for(c, body_json(r)["id"])["status"], "completed");
    // the server still serves
    EXPECT_EQ(c.Get("/health")->status, 200);
}

// ---------------------------------------------------------------------------------------------------------
// The seam: one server (reduced reference sizes) and the CLI on the same tiny checkpoint.
class ServeSeam : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        fs::remove_all(kWork / "seam_out");
        server_ = new Server(
            kWork / "seam_out",
            {"--max-body-bytes", "8000000", "--reference-image-edge", "64", "--reference-video-edge", "32"},
            "seam");
    }
    static void TearDownTestSuite() {
        delete server_;
        server_ = nullptr;
    }
    void SetUp() override { ASSERT_TRUE(server_ && server_->up()); }
    static Server* server_;

    // The component loads of the server's /metrics.
    static std::map<std::string, int> loads() {
        auto c = server_->client();
        auto r = c.Get("/metrics");
        std::map<std::string, int> out;
        if (!r) return out;
        std::istringstream in(r->body);
        std::string line;
        const std::string tag = "h3_component_loads_total{component=\"";
        while (std::getline(in, line)) {
            if (line.rfind(tag, 0) != 0) continue;
            const size_t end = line.find('"', tag.size());
            out[line.substr(tag.size(), end - tag.size())] = std::stoi(line.substr(line.find("} ") + 2));
        }
        return out;
    }
};
Server* ServeSeam::server_ = nullptr;

// Runs `h3-engine generate` with the server's settings and returns the --save-latents file's bytes.
std::string generate_latents_cli(const std::string& name, const std::string& extra) {
    const fs::path out = kWork / ("cli_" + name + ".safetensors");
    fs::remove(out);
    const std::string cmd =
        kBinary + " generate --model " + tiny_model().string() +
        " --size 64x32 --seconds 4 --steps 3 --seed 5 --device cpu --dtype fp32 --progress "
        "none --reference-image-edge 64 --reference-video-edge 32 " +
        extra + " --save-latents " + out.string() + " > " + (kWork / (name + ".log")).string() + " 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n" << read_file(kWork / (name + ".log"));
    return read_file(out);
}

// Waits for a job and downloads its latents.
// The tiny t2va job the latents comparisons submit (the CLI side: generate_latents_cli with the same prompt).
json tiny_t2va_latents_request() {
    return {{"prompt", "a red fox runs through snow"},
            {"size", "64x32"},
            {"seconds", 4},
            {"seed", 5},
            {"num_inference_steps", 3},
            {"output_format", "latents"}};
}

std::string server_latents(httplib::Client& c, const httplib::Result& submitted) {
    EXPECT_TRUE(submitted);
    if (!submitted) return "";
    EXPECT_EQ(submitted->status, 200) << submitted->body;
    const json v = wait_for(c, body_json(submitted)["id"]);
    EXPECT_EQ(v["status"], "completed") << v.dump();
    EXPECT_EQ(v["output_format"], "latents");
    const std::string id = v["id"];
    auto r = c.Get(("/v1/videos/" + id + "/content?variant=latents").c_str());
    EXPECT_TRUE(r);
    if (!r) return "";
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(r->get_header_value("Content-Type"), "application/octet-stream");
    expect_error(c.Get(("/v1/videos/" + id + "/content").c_str()), 400, "variant", "output_format latents");
    return r->body;
}

TEST_F(ServeSeam, WarmServerDoesNotReloadDecoders) {
    // The serving plan keeps the DiT and the decoders resident: they load at start, and two jobs lease them
    // again without reading them (the counters come from the model store).
    auto before = loads();
    EXPECT_EQ(before["transformer"], 1);
    EXPECT_EQ(before["vae_decoder"], 1);
    EXPECT_EQ(before["audio_vae_decoder"], 1);
    auto c = server_->client();
    json metrics;
    for (int i = 0; i < 2; ++i) {
        const json v = wait_for(c, submit(c, tiny_request("warm " + std::to_string(i), 2))["id"]);
        ASSERT_EQ(v["status"], "completed") << v.dump();
        metrics = v["metrics"];
        EXPECT_EQ(metrics["component_loads"]["vae_decoder"], 1) << metrics.dump();
        EXPECT_EQ(metrics["component_loads"]["audio_vae_decoder"], 1) << metrics.dump();
        EXPECT_EQ(metrics["component_loads"]["transformer"], 1) << metrics.dump();
    }
    EXPECT_EQ(metrics["task"], "t2va");
    EXPECT_TRUE(metrics.contains("peak_device_memory_bytes"));
    const auto after = loads();
    EXPECT_EQ(after.at("vae_decoder"), 1);
    EXPECT_EQ(after.at("audio_vae_decoder"), 1);
    EXPECT_EQ(after.at("transformer"), 1);
    EXPECT_EQ(after.at("text_encoder"), before["text_encoder"]);
}

TEST_F(ServeSeam, LatentsMatchGenerate) {
    // The same job through `generate --save-latents` and through the server's latents output: the same bytes,
    // for t2va, fl2va (a first_frame part / --first-frame) and ref2va (reference parts / --reference).
    auto c = server_->client();
    const std::string png = png_bytes(), wav = sine_wav();
    const fs::path wav_file = kWork / "seam_voice.wav";
    std::ofstream(wav_file, std::ios::binary) << wav;
    const std::string img = std::string(H3_SOURCE_DIR) + "/tests/data/images/png_rgb.png";
    const auto form = [](const std::string& prompt) {
        return httplib::MultipartFormDataItems{
            {"prompt", prompt, "", ""}, {"size", "64x32", "", ""},
            {"seconds", "4", "", ""},   {"num_inference_steps", "3", "", ""},
            {"seed", "5", "", ""},      {"output_format", "latents", "", ""}};
    };

    const json t2va = tiny_t2va_latents_request();
    const std::string served_t2va = server_latents(c, c.Post("/v1/videos", t2va.dump(), "application/json"));
    const std::string cli_t2va = generate_latents_cli("t2va", "--prompt 'a red fox runs through snow'");
    ASSERT_GT(cli_t2va.size(), 100u);
    EXPECT_TRUE(served_t2va == cli_t2va) << served_t2va.size() << " vs " << cli_t2va.size() << " bytes";

    auto items = form("a keyframe");
    items.push_back({"first_frame", png, "first.png", "image/png"});
    const std::string served_fl2va = server_latents(c, c.Post("/v1/videos", items));
    const std::string cli_fl2va = generate_latents_cli("fl2va", "--prompt 'a keyframe' --first-frame " + img);
    ASSERT_GT(cli_fl2va.size(), 100u);
    EXPECT_TRUE(served_fl2va == cli_fl2va);
    EXPECT_FALSE(cli_fl2va == cli_t2va);

    items = form("a referenced ball");
    items.push_back({"reference", png, "subject.png", "image/png"});
    items.push_back({"reference", wav, "voice.wav", "audio/wav"});
    const std::string served_ref2va = server_latents(c, c.Post("/v1/videos", items));
    const std::string cli_ref2va = generate_latents_cli(
        "ref2va", "--prompt 'a referenced ball' --reference " + img + " --reference " + wav_file.string());
    ASSERT_GT(cli_ref2va.size(), 100u);
    EXPECT_TRUE(served_ref2va == cli_ref2va);
    EXPECT_FALSE(cli_ref2va == cli_t2va);

    // the ref2va job ran on transformer_ref (loaded once); the video encoder is per job
    const auto l = loads();
    EXPECT_EQ(l.at("transformer_ref"), 1);
    EXPECT_EQ(l.at("vae_encoder"), 2); // the fl2va job and the ref2va job
    EXPECT_EQ(l.at("vae_decoder"), 1);
}

// ---------------------------------------------------------------------------------------------------------
// LoRA through the server: `serve --lora-dir DIR`, the request field lora [{"path", "scale"}] in JSON and
// multipart, adapters applied per request at run time (the same bytes as `generate --lora-mode runtime`), a
// job without adapters after one with them exactly the base result, and bad adapters rejected with 400 naming
// `lora` while the server keeps serving.

// A safetensors file of f32 tensors {name: (shape, fill value)}.
void write_f32_safetensors(const fs::path& path,
                           const std::vector<std::pair<std::string, std::vector<int64_t>>>& tensors) {
    json header = json::object();
    std::string data;
    for (size_t i = 0; i < tensors.size(); ++i) {
        const auto& [name, shape] = tensors[i];
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        const size_t begin = data.size();
        for (int64_t k = 0; k < n; ++k) {
            const float v = 0.01f * static_cast<float>((k * 7 + static_cast<int64_t>(i)) % 13) - 0.06f;
            data.append(reinterpret_cast<const char*>(&v), sizeof v);
        }
        header[name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {begin, data.size()}}};
    }
    std::string h = header.dump();
    while (h.size() % 8) h.push_back(' ');
    std::ofstream out(path, std::ios::binary);
    const uint64_t len = h.size();
    out.write(reinterpret_cast<const char*>(&len), sizeof len);
    out << h << data;
}

class ServeLora : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        const fs::path dir = lora_dir();
        fs::remove_all(dir);
        fs::create_directories(dir / "sub");
        // the tiny DiT's adapter (make-tiny --lora writes one for the same config), one in a subfolder too
        const std::string cmd = kBinary + " make-tiny " + (kWork / "lora_scratch").string() + " --lora " +
                                (dir / "tiny.safetensors").string() + " > /dev/null 2>&1";
        EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
        fs::copy_file(dir / "tiny.safetensors", dir / "sub" / "copy.safetensors");
        // bad adapters: a shape that fits no projection, a rank mismatch between A and B, an unknown key
        const std::string q = "transformer.transformer_blocks.0.attn.to_q.";
        write_f32_safetensors(dir / "wrong_shape.safetensors",
                              {{q + "lora_A.weight", {4, 65}}, {q + "lora_B.weight", {64, 4}}});
        write_f32_safetensors(dir / "rank_mismatch.safetensors",
                              {{q + "lora_A.weight", {4, 64}}, {q + "lora_B.weight", {64, 3}}});
        write_f32_safetensors(dir / "unknown_key.safetensors",
                              {{q + "lora_A.weight", {4, 64}},
                               {q + "lora_B.weight", {64, 4}},
                               {"transformer.not_a_module.lora_A.weight", {4, 64}},
                               {"transformer.not_a_module.lora_B.weight", {64, 4}}});
        write_f32_safetensors(kWork / "outside.safetensors",
                              {{q + "lora_A.weight", {4, 64}}, {q + "lora_B.weight", {64, 4}}});
        std::error_code ec;
        fs::create_symlink(kWork / "outside.safetensors", dir / "link_out.safetensors", ec);
        fs::remove_all(kWork / "lora_out");
        server_ = new Server(kWork / "lora_out", {"--lora-dir", dir.string()}, "lora");
    }
    static void TearDownTestSuite() {
        delete server_;
        server_ = nullptr;
    }
    void SetUp() override { ASSERT_TRUE(server_ && server_->up()); }
    static fs::path lora_dir() { return kWork / "loras"; }
    static json request(const json& lora) {
        json r = {{"prompt", "a red fox runs through snow"},
                  {"size", "64x32"},
                  {"seconds", 4},
                  {"seed", 5},
                  {"num_inference_steps", 3},
                  {"output_format", "latents"}};
        if (!lora.is_null()) r["lora"] = lora;
        return r;
    }
    static Server* server_;
};
Server* ServeLora::server_ = nullptr;

TEST_F(ServeLora, PerRequestAdaptersLeaveTheBaseExact) {
    auto c = server_->client();
    const auto post = [&](const json& lora) {
        return server_latents(c, c.Post("/v1/videos", request(lora).dump(), "application/json"));
    };
    const std::string base = post(json());
    const std::string adapted = post(json::array({{{"path", "tiny.safetensors"}, {"scale", 0.8}}}));
    const std::string again = post(json());
    ASSERT_GT(base.size(), 100u);
    ASSERT_EQ(adapted.size(), base.size());
    EXPECT_FALSE(adapted == base) << "the adapter did not change the latents";
    EXPECT_TRUE(again == base) << "a job without adapters after one with them is not the base result";
    // the one flow: the same bytes as generate --lora ... --lora-mode runtime, and as the base without it
    const std::string cli = generate_latents_cli(
        "lora_runtime", "--prompt 'a red fox runs through snow' --lora " +
                            (lora_dir() / "tiny.safetensors").string() + ":0.8 --lora-mode runtime");
    EXPECT_TRUE(cli == adapted) << cli.size() << " vs " << adapted.size() << " bytes";
    EXPECT_TRUE(generate_latents_cli("lora_base", "--prompt 'a red fox runs through snow'") == base);
    // scale 0 is the base; the subfolder copy is the same adapter; the record keeps the field
    EXPECT_TRUE(post(json::array({{{"path", "tiny.safetensors"}, {"scale", 0}}})) == base);
    const std::string copy = post(json::array({{{"path", "sub/copy.safetensors"}, {"scale", 0.8}}}));
    EXPECT_TRUE(copy == adapted);
    const json done = wait_for(c, submit(c, request(json::array({{{"path", "tiny.safetensors"}}})))["id"]);
    EXPECT_EQ(done["status"], "completed") << done.dump();
    const json record = json::parse(
        read_file(kWork / "lora_out" / done["id"].get<std::string>() / "job.json"), nullptr, false);
    EXPECT_EQ(record["request"]["lora"], json::array({{{"path", "tiny.safetensors"}, {"scale", 1.0}}}))
        << record.dump();
}

TEST_F(ServeLora, MultipartLoraPart) {
    auto c = server_->client();
    httplib::MultipartFormDataItems items = {
        {"prompt", "a red fox runs through snow", "", ""},
        {"size", "64x32", "", ""},
        {"seconds", "4", "", ""},
        {"num_inference_steps", "3", "", ""},
        {"seed", "5", "", ""},
        {"output_format", "latents", "", ""},
        {"lora", R"([{"path": "tiny.safetensors", "scale": 0.8}])", "", ""}};
    const std::string form = server_latents(c, c.Post("/v1/videos", items));
    const std::string json_body = server_latents(
        c, c.Post("/v1/videos", request(json::array({{{"path", "tiny.safetensors"}, {"scale", 0.8}}})).dump(),
                  "application/json"));
    ASSERT_GT(form.size(), 100u);
    EXPECT_TRUE(form == json_body);
    items.back() = {"lora", "[{\"path\": ", "", ""};
    expect_error(c.Post("/v1/videos", items), 400, "lora", "JSON");
}

TEST_F(ServeLora, BadAdaptersGive400AndTheServerKeepsServing) {
    auto c = server_->client();
    const auto bad = [&](const json& lora, const std::string& needle, bool strict = false) {
        json r = request(lora);
        if (strict) r["lora_strict"] = true;
        expect_error(c.Post("/v1/videos", r.dump(), "application/json"), 400, "lora", needle);
    };
    const auto one = [](const std::string& path) { return json::array({{{"path", path}, {"scale", 1}}}); };
    bad(one("wrong_shape.safetensors"), "wrong_shape.safetensors");
    bad(one("rank_mismatch.safetensors"), "rank_mismatch.safetensors");
    bad(one("unknown_key.safetensors"), "not_a_module", true);
    bad(one("../outside.safetensors"), "..");
    bad(one((kWork / "outside.safetensors").string()), "absolute");
    bad(one("link_out.safetensors"), "outside");
    bad(one("missing.safetensors"), "missing.safetensors");
    bad(one("tiny.txt"), ".safetensors");
    bad(json::array({{{"path", "tiny.safetensors"}, {"scale", "x"}}}), "scale");
    bad(json::array({{{"path", "tiny.safetensors"}, {"weight", 1}}}), "weight");
    bad(json("tiny.safetensors"), "JSON");
    // not strict: the unknown key is skipped and the known pair applies
    const json ok = submit(c, request(one("unknown_key.safetensors")));
    EXPECT_EQ(wait_for(c, ok["id"])["status"], "completed");
    // and a good job still runs after all of them
    const json v = wait_for(c, submit(c, request(one("tiny.safetensors")))["id"]);
    EXPECT_EQ(v["status"], "completed") << v.dump();
    auto h = c.Get("/health");
    ASSERT_TRUE(h);
    EXPECT_EQ(h->status, 200);
}

TEST_F(ServeSeam, LoraWithoutLoraDirIs400) {
    auto c = server_->client();
    json r = tiny_request();
    r["lora"] = json::array({{{"path", "tiny.safetensors"}, {"scale", 1}}});
    expect_error(c.Post("/v1/videos", r.dump(), "application/json"), 400, "lora", "LoRA folder");
    const json v = wait_for(c, submit(c, tiny_request("still serving", 2))["id"]);
    EXPECT_EQ(v["status"], "completed");
}

// ---- FastH3: `attention` (JSON and form field) and the sidecar's defaults through the one flow
const fs::path& fasth3_model() {
    static const fs::path dir = [] {
        const fs::path d = kWork / "tiny_fasth3";
        if (!fs::exists(d / "fastvideo_inference.json")) {
            fs::create_directories(kWork);
            const std::string cmd =
                kBinary + " make-tiny " + d.string() + " --seed 5 --variant fasth3 > /dev/null 2>&1";
            EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
        }
        return d;
    }();
    return dir;
}

// `generate --save-latents` on the FastH3 tiny with the server's settings; returns the file's bytes and
// leaves generate's stderr in `log`.
std::string fasth3_latents_cli(const std::string& name, const std::string& extra, std::string* log) {
    const fs::path out = kWork / ("fasth3_" + name + ".safetensors"),
                   err = kWork / ("fasth3_" + name + ".log");
    fs::remove(out);
    const std::string cmd =
        kBinary + " generate --model " + fasth3_model().string() +
        " --prompt 'a fox at dusk' --size 64x32 --seconds 4 --seed 5 --device cpu --dtype "
        "fp32 --progress none " +
        extra + " --save-latents " + out.string() + " > /dev/null 2> " + err.string();
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n" << read_file(err);
    if (log) *log = read_file(err);
    return read_file(out);
}

TEST(ServeFastH3, AttentionGivenAndDefaultedMatchGenerate) {
    fs::remove_all(kWork / "fasth3_out");
    Server server(kWork / "fasth3_out", {"--reference-image-edge", "64", "--reference-video-edge", "32"},
                  "fasth3", {}, true, kBinary, fasth3_model());
    ASSERT_TRUE(server.up());
    auto c = server.client();
    const json base = {{"prompt", "a fox at dusk"},
                       {"size", "64x32"},
                       {"seconds", 4},
                       {"seed", 5},
                       {"output_format", "latents"}};

    // given (JSON): the request's VSA options on the sidecar's 4-forward rungs
    json given = base;
    given["attention"] = "vsa:sparsity=0.5,mode=compete";
    const std::string served_given =
        server_latents(c, c.Post("/v1/videos", given.dump(), "application/json"));
    std::string log;
    const std::string cli_given =
        fasth3_latents_cli("given", "--attention vsa:sparsity=0.5,mode=compete", &log);
    ASSERT_GT(cli_given.size(), 100u);
    EXPECT_NE(log.find("5 steps (4 forwards, FastH3 rungs)"), std::string::npos) << log;
    EXPECT_NE(log.find("attention vsa(sparsity=0.5,mode=compete)"), std::string::npos) << log;
    EXPECT_TRUE(served_given == cli_given) << served_given.size() << " vs " << cli_given.size() << " bytes";

    // defaulted (multipart form, no attention, no steps): the sidecar's VSA 0.9 and rungs
    const httplib::MultipartFormDataItems form = {{"prompt", "a fox at dusk", "", ""},
                                                  {"size", "64x32", "", ""},
                                                  {"seconds", "4", "", ""},
                                                  {"seed", "5", "", ""},
                                                  {"output_format", "latents", "", ""}};
    auto submitted = c.Post("/v1/videos", form);
    ASSERT_TRUE(submitted);
    const std::string id = body_json(submitted).value("id", "");
    const std::string served_default = server_latents(c, submitted);
    EXPECT_EQ(get_video(c, id)["num_inference_steps"], 5);
    const std::string cli_default = fasth3_latents_cli("default", "", &log);
    EXPECT_NE(log.find("attention vsa(sparsity=0.9,mode=exempt)"), std::string::npos) << log;
    EXPECT_TRUE(served_default == cli_default);
    EXPECT_NE(served_default.find("vsa(sparsity=0.9,mode=exempt)"), std::string::npos); // the metadata
    EXPECT_FALSE(served_default == served_given);

    // dense as a form field: the base attention, other latents
    auto dense_form = form;
    dense_form.push_back({"attention", "dense", "", ""});
    const std::string served_dense = server_latents(c, c.Post("/v1/videos", dense_form));
    EXPECT_TRUE(served_dense == fasth3_latents_cli("dense", "--attention dense", nullptr));
    EXPECT_FALSE(served_dense == served_default);

    // bad attention: 400 naming the field, before anything runs; ref2va under VSA is refused
    json bad = base;
    bad["attention"] = "vsa:sparsity=2";
    expect_error(c.Post("/v1/videos", bad.dump(), "application/json"), 400, "attention", "sparsity 2");
    bad["attention"] = 0.5;
    expect_error(c.Post("/v1/videos", bad.dump(), "application/json"), 400, "attention", "string");
    auto ref_form = form;
    ref_form.push_back({"attention", "vsa", "", ""});
    ref_form.push_back({"reference", png_bytes(), "subject.png", "image/png"});
    ref_form.push_back({"reference", sine_wav(), "voice.wav", "audio/wav"});
    expect_error(c.Post("/v1/videos", ref_form), 400, "attention", "ref2va is not supported");
}

// `serve --vae-precision bf16` (issue #45): the resident video decoder runs bf16 blocks for every job;
// /health's placement and the job's metrics name it, the job's decode ran bf16 block GEMMs. A bad value is a
// usage error naming the flag before the server listens.
TEST(ServeVaePrecision, Bf16DecoderIsServedAndReported) {
    fs::remove_all(kWork / "vae_bf16_out");
    Server server(kWork / "vae_bf16_out", {"--vae-precision", "bf16"}, "vae_bf16");
    ASSERT_TRUE(server.up());
    auto c = server.client();
    auto h = c.Get("/health");
    ASSERT_TRUE(h);
    const std::string placement = body_json(h).value("placement", "");
    EXPECT_NE(placement.find("vae_decoder resident cpu bf16"), std::string::npos) << placement;
    const json t2va = {{"prompt", "a red fox runs through snow"},
                       {"size", "64x32"},
                       {"seconds", 4},
                       {"seed", 5},
                       {"num_inference_steps", 2}};
    auto submitted = c.Post("/v1/videos", t2va.dump(), "application/json");
    ASSERT_TRUE(submitted);
    const json v = wait_for(c, body_json(submitted)["id"]);
    ASSERT_EQ(v["status"], "completed") << v.dump();
    const json& m = v["metrics"];
    EXPECT_EQ(m.value("placement", ""), placement);
    const json gemm = m["kernels"]["decode"]["gemm"];
    EXPECT_GT(gemm.value("cpu-bf16", 0), 0) << m["kernels"].dump();

    Server bad(kWork / "vae_bad_out", {"--vae-precision", "fp16"}, "vae_bad", {}, false);
    EXPECT_FALSE(bad.up());
    EXPECT_EQ(bad.exit_status(), 2);
    EXPECT_NE(bad.stderr_text().find("--vae-precision"), std::string::npos) << bad.stderr_text();
}

// Weight residency through the seam: `serve --residency layerwise` streams the DiT's blocks (and the text
// stack's layers) from host masters, reports the plan in /health and the job's metrics, and writes the
// same latents as the resident path (`generate`, the resident plan: LatentsMatchGenerate shows the two
// agree).
TEST(ServeResidency, LayerwiseMatchesResident) {
    fs::remove_all(kWork / "layerwise_out");
    Server server(kWork / "layerwise_out", {"--residency", "layerwise", "--host-pinning", "off"},
                  "layerwise");
    ASSERT_TRUE(server.up());
    auto c = server.client();
    auto h = c.Get("/health");
    ASSERT_TRUE(h);
    const json health = body_json(h);
    const std::string placement = health.value("placement", "");
    EXPECT_NE(placement.find("transformer resident cpu fp32 weights layerwise"), std::string::npos)
        << placement;
    EXPECT_NE(placement.find("text_encoder resident cpu fp32 weights layerwise"), std::string::npos)
        << placement;
    const json t2va = {{"prompt", "a red fox runs through snow"},
                       {"size", "64x32"},
                       {"seconds", 4},
                       {"seed", 5},
                       {"num_inference_steps", 3},
                       {"output_format", "latents"}};
    auto submitted = c.Post("/v1/videos", t2va.dump(), "application/json");
    ASSERT_TRUE(submitted);
    const json v = wait_for(c, body_json(submitted)["id"]);
    ASSERT_EQ(v["status"], "completed") << v.dump();
    const json& m = v["metrics"];
    EXPECT_EQ(m.value("placement", ""), placement);
    EXPECT_NE(m.value("dit_weights", "").find("layerwise"), std::string::npos) << m.dump();
    auto r = c.Get(("/v1/videos/" + v["id"].get<std::string>() + "/content?variant=latents").c_str());
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const std::string resident =
        generate_latents_cli("t2va_resident", "--prompt 'a red fox runs through snow'");
    ASSERT_GT(resident.size(), 100u);
    EXPECT_TRUE(r->body == resident) << r->body.size() << " vs " << resident.size() << " bytes";
}

// ---- the checkpoint's own defaults (h3_defaults.json): GET /v1/models names the model and what a request
// that says nothing gets; such a request runs at them, with a warning for words outside the declared caption
// vocabulary and the CPU estimate in its object; the documented alias `steps` is accepted and reported as
// num_inference_steps; a completed object names its content's URL.
const fs::path& defaults_model() {
    static const fs::path dir = [] {
        const fs::path d = kWork / "tiny_defaults";
        if (!fs::exists(d / "model_index.json")) {
            fs::create_directories(kWork);
            const std::string cmd = kBinary + " make-tiny " + d.string() + " --seed 1 > /dev/null 2>&1";
            EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
        }
        std::ofstream(d / "h3_defaults.json")
            << R"({"size": "64x32", "frames": 107, "num_inference_steps": 3, "vocabulary": ["a", "red", "ball"]})";
        return d;
    }();
    return dir;
}

TEST(ServeModels, DefaultsFromTheCheckpoint) {
    fs::remove_all(kWork / "models_out");
    Server server(kWork / "models_out", {}, "models", {}, true, kBinary, defaults_model());
    ASSERT_TRUE(server.up());
    auto c = server.client();
    auto r = c.Get("/v1/models");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json list = body_json(r);
    ASSERT_EQ(list["object"], "list");
    ASSERT_EQ(list["data"].size(), 1u) << r->body;
    const json& m = list["data"][0];
    EXPECT_EQ(m["id"], "tiny_defaults");
    EXPECT_EQ(m["object"], "model");
    EXPECT_EQ(m["device"], "cpu");
    EXPECT_EQ(m["defaults"]["size"], "64x32") << r->body;
    EXPECT_EQ(m["defaults"]["frames"], 107) << r->body;
    EXPECT_EQ(m["defaults"]["num_inference_steps"], 3) << r->body;
    EXPECT_NE(m["defaults_from"].get<std::string>().find("h3_defaults.json"), std::string::npos);
    EXPECT_EQ(m["limits"]["num_inference_steps"], json::array({2, 1000}));
    EXPECT_EQ(m["vocabulary"], json::array({"a", "ball", "red"}));

    // a request with a prompt alone: the checkpoint's size, frames and steps; the unknown words warned about
    const json v = submit(c, {{"prompt", "a red cat"}, {"output_format", "latents"}});
    EXPECT_EQ(v["size"], "64x32") << v.dump();
    EXPECT_EQ(v["frames"], 107);
    EXPECT_EQ(v["num_inference_steps"], 3);
    ASSERT_EQ(v["warnings"].size(), 1u) << v.dump();
    EXPECT_NE(v["warnings"][0].get<std::string>().find("'cat'"), std::string::npos) << v.dump();
    EXPECT_EQ(v["warnings"][0].get<std::string>().find("'red'"), std::string::npos) << v.dump();
    ASSERT_TRUE(v["estimated_seconds"].is_number()) << v.dump();
    EXPECT_GT(v["estimated_seconds"].get<double>(), 0.0);
    EXPECT_TRUE(v["url"].is_null());
    const json done = wait_for(c, v["id"]);
    ASSERT_EQ(done["status"], "completed") << done.dump();
    EXPECT_EQ(done["url"], "/v1/videos/" + done["id"].get<std::string>() + "/content");

    // the alias: `steps` is num_inference_steps, named so in the object and in errors
    const json a = submit(c, {{"prompt", "a red ball"}, {"steps", 2}, {"output_format", "latents"}});
    EXPECT_EQ(a["num_inference_steps"], 2) << a.dump();
    EXPECT_TRUE(a["warnings"].empty()) << a.dump();
    expect_error(c.Post("/v1/videos", json({{"prompt", "a"}, {"steps", 1001}}).dump(), "application/json"),
                 400, "num_inference_steps", "[2, 1000]");
    expect_error(c.Post("/v1/videos",
                        json({{"prompt", "a"}, {"steps", 3}, {"num_inference_steps", 3}}).dump(),
                        "application/json"),
                 400, "num_inference_steps", "alias");
    wait_for(c, a["id"]);
}

TEST(ServeTtl, OutputsExpire) {
    const fs::path out = kWork / "ttl_out";
    fs::remove_all(out);
    Server server(out, {"--ttl", "1"}, "ttl");
    ASSERT_TRUE(server.up());
    auto c = server.client();
    const json v = wait_for(c, submit(c, tiny_request("short lived", 2))["id"]);
    ASSERT_EQ(v["status"], "completed");
    EXPECT_EQ(v["expires_at"].get<int64_t>(), v["completed_at"].get<int64_t>() + 1);
    const std::string id = v["id"];
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (fs::exists(out / id) && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(100ms);
    EXPECT_FALSE(fs::exists(out / id));
    expect_error(c.Get(("/v1/videos/" + id).c_str()), 404, "id");
}

} // namespace

// ---- device groups: `serve --sp 2` runs every job on its 2 ranks (threads; rank 0 conditions, both denoise
// and split the video decode): the latents equal the single-rank CLI's within 1e-5 relative, a job whose
// rank fails (the fault-injecting stand-in) fails alone and the next job completes; under the launcher
// convention (RANK / WORLD_SIZE) a --gpus list is refused with a message saying why.
namespace {
double latents_rel_err(const std::string& a_bytes, const std::string& b_bytes, const std::string& tensor) {
    const fs::path a = kWork / "group_a.safetensors", b = kWork / "group_b.safetensors";
    std::ofstream(a, std::ios::binary) << a_bytes;
    std::ofstream(b, std::ios::binary) << b_bytes;
    auto fa = h3::io::SafetensorsFile::open(a.string());
    auto fb = h3::io::SafetensorsFile::open(b.string());
    if (!fa.ok() || !fb.ok()) return 1e9;
    auto ta = fa->tensor(tensor), tb = fb->tensor(tensor);
    if (!ta.ok() || !tb.ok() || !(ta->shape() == tb->shape())) return 1e9;
    auto x = *h3::to_f32_vector(*ta), y = *h3::to_f32_vector(*tb);
    double num = 0, den = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        num = std::max(num, std::fabs(double(x[i]) - y[i]));
        den = std::max(den, std::fabs(double(y[i])));
    }
    return num / den;
}
} // namespace

TEST(ServeGroup, SpTwoMatchesOneRankAndAFailedRankFailsAlone) {
    fs::remove_all(kWork / "group_out");
    Server server(kWork / "group_out", {"--sp", "2", "--fault-inject-prompt", kFaultPrompt}, "group", {},
                  true, kFaultBinary);
    ASSERT_TRUE(server.up());
    auto c = server.client();
    const json health = body_json(c.Get("/health"));
    EXPECT_NE(health.dump().find("dit group sp 2 x tp 1 (2 ranks on cpu)"), std::string::npos)
        << health.dump();
    const json t2va = tiny_t2va_latents_request();
    const std::string served = server_latents(c, c.Post("/v1/videos", t2va.dump(), "application/json"));
    const std::string single = generate_latents_cli("group_single", "--prompt 'a red fox runs through snow'");
    ASSERT_GT(single.size(), 100u);
    EXPECT_LE(latents_rel_err(served, single, "video_latents"), 1e-5);
    EXPECT_LE(latents_rel_err(served, single, "audio_latents"), 1e-5);
    // a job whose rank fails mid-denoise fails alone; the group serves the next job (an MP4: the decode too)
    const std::string bad = submit(c, tiny_request(kFaultPrompt))["id"];
    const std::string good = submit(c, tiny_request("after the failed rank"))["id"];
    const json b = wait_for(c, bad);
    EXPECT_EQ(b["status"], "failed") << b.dump();
    EXPECT_NE(b["error"]["message"].get<std::string>().find("injected"), std::string::npos) << b.dump();
    const json g = wait_for(c, good);
    ASSERT_EQ(g["status"], "completed") << g.dump();
    auto mp4 = c.Get(("/v1/videos/" + good + "/content").c_str());
    ASSERT_TRUE(mp4);
    ASSERT_EQ(mp4->status, 200);
    check_mp4(mp4->body, "group_after_fault.mp4");
    EXPECT_TRUE(server.alive());

    // under the launcher convention each process is one rank (tests/cli/serve_replicas.sh serves a launched
    // group): a device list there is refused, naming the flag and saying why
    Server launched(kWork / "group_launched_out", {"--sp", "2", "--gpus", "0,1"}, "group_launched",
                    {"RANK=0", "WORLD_SIZE=2"}, false);
    EXPECT_FALSE(launched.up());
    EXPECT_EQ(launched.exit_status(), 2);
    EXPECT_NE(launched.stderr_text().find("--gpus: under the launcher convention"), std::string::npos)
        << launched.stderr_text();
}

// Issue #42: every stage reads the cancel flag within a fraction of a second, and the grace timer is the
// backstop for one that would not: SIGTERM with --on-term cancel while a job ignores its flag (the test
// tool's stuck prompt) exits with status 4 after the 10 s grace, naming the job and the stage it interrupted.
TEST(ServeShutdown, GraceTimerEndsAJobThatIgnoresItsCancel) {
    fs::remove_all(kWork / "stuck_out");
    Server server(
        kWork / "stuck_out",
        {"--on-term", "cancel", "--fault-inject-prompt", kFaultPrompt, "--fault-stuck-prompt", "STUCK"},
        "stuck", {}, true, kFaultBinary);
    ASSERT_TRUE(server.up());
    auto c = server.client();
    const std::string id = submit(c, tiny_request("STUCK"))["id"];
    const json v = wait_for(
        c, id, nullptr, [](const json& j) { return j["status"] == "in_progress"; }, 60s);
    ASSERT_EQ(v["status"], "in_progress") << v.dump();
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(server.terminate(30s), 4);
    const auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_GE(took, 9s);
    EXPECT_LT(took, 15s);
    const std::string err = server.stderr_text();
    EXPECT_NE(err.find("job " + id + " (stage encode"), std::string::npos) << err;
    EXPECT_NE(err.find("did not stop within 10000 ms"), std::string::npos) << err;
}

#else

TEST(Serve, NotBuilt) {
    GTEST_SKIP() << "this build has no HTTP server (libmicrohttpd not found)";
}

#endif
