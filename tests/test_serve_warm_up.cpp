// `h3-engine serve --warmup` (issue #45, no first-step penalty) on the tiny checkpoint (CPU): the server
// warms up before its first job (/health: warm_up state, "warming_up" with 503 until it ends), its jobs give
// the same latents as a server without the warm-up, bit for bit, and their first forward has no one-time work
// left, nor has a cold server's second job of the same shape (the DiT's kept workspace); a warm-up that fails
// is reported in /health and the server serves on; a --warmup-request that does not read is an error before
// serving.
#include <gtest/gtest.h>

#ifdef H3_WITH_HTTP_SERVER

#define H3_SERVE_WORK_DIR "test_serve_warm_up"
#include "serve_harness.h"

using namespace h3::test;

namespace {

// The tiny t2va job (latents output) and the warm-up request of the same shape.
json tiny_job() {
    return {{"prompt", "a red fox runs through snow"},
            {"size", "64x32"},
            {"seconds", 4},
            {"seed", 5},
            {"num_inference_steps", 3},
            {"output_format", "latents"}};
}

// Waits until /health reports the warm-up ended; returns the last /health body.
json wait_warm(Server& s) {
    auto c = s.client();
    const auto deadline = std::chrono::steady_clock::now() + 120s;
    json h;
    while (std::chrono::steady_clock::now() < deadline) {
        auto r = c.Get("/health");
        if (r) {
            h = body_json(r);
            const std::string state = h["warm_up"].value("state", "");
            if (state == "pending" || state == "running") {
                EXPECT_EQ(r->status, 503) << r->body;
                EXPECT_EQ(h["status"], "warming_up");
            } else {
                EXPECT_EQ(r->status, 200) << r->body;
                return h;
            }
        }
        std::this_thread::sleep_for(20ms);
    }
    ADD_FAILURE() << "the warm-up did not end: " << h.dump();
    return h;
}

// Submits the job, waits for it; returns {latents bytes, the job's metrics}.
std::pair<std::string, json> run_job(Server& s) {
    auto c = s.client();
    const json v = submit(c, tiny_job());
    const json done = wait_for(c, v["id"]);
    EXPECT_EQ(done["status"], "completed") << done.dump();
    auto r = c.Get(("/v1/videos/" + done["id"].get<std::string>() + "/content?variant=latents").c_str());
    EXPECT_TRUE(r && r->status == 200);
    return {r ? r->body : "", done["metrics"]};
}

} // namespace

TEST(ServeWarmUp, WarmServerGivesTheSameLatentsWithNoFirstStepWork) {
    fs::remove_all(kWork / "warm_out");
    fs::remove_all(kWork / "cold_out");
    Server warm(kWork / "warm_out", {"--warmup", "on", "--warmup-request", tiny_job().dump()}, "warm");
    ASSERT_TRUE(warm.up());
    const json health = wait_warm(warm);
    EXPECT_EQ(health["warm_up"]["state"], "done") << health.dump();
    EXPECT_GT(health["warm_up"]["seconds"].get<double>(), 0.0);
    const auto [warm_latents, warm_metrics] = run_job(warm);
    EXPECT_EQ(warm_metrics["first_forward"]["workspace_allocations"], 0) << warm_metrics.dump();
    EXPECT_EQ(warm_metrics["first_forward"]["gemm_tunings"], 0);

    Server cold(kWork / "cold_out", {"--warmup", "off"}, "cold");
    ASSERT_TRUE(cold.up());
    const json ch = body_json(cold.client().Get("/health"));
    EXPECT_EQ(ch["status"], "ok");
    EXPECT_FALSE(ch.contains("warm_up")) << ch.dump(); // off: nothing to report
    const auto [cold_latents, cold_metrics] = run_job(cold);
    EXPECT_GT(cold_metrics["first_forward"]["workspace_allocations"].get<int64_t>(), 0)
        << cold_metrics.dump();
    ASSERT_FALSE(cold_latents.empty());
    EXPECT_TRUE(warm_latents == cold_latents) << "the warm-up changed the job's latents";
    const auto [again_latents, again_metrics] = run_job(cold); // the kept workspace (--dit-workspace kept)
    EXPECT_EQ(again_metrics["first_forward"]["workspace_allocations"], 0) << again_metrics.dump();
    EXPECT_TRUE(again_latents == cold_latents);
    EXPECT_EQ(warm.terminate(), 0);
    EXPECT_EQ(cold.terminate(), 0);
}

TEST(ServeWarmUp, FailedWarmUpIsReportedAndTheServerServesOn) {
    fs::remove_all(kWork / "failed_out");
    json bad = tiny_job();
    bad["size"] = "7x3";
    Server s(kWork / "failed_out", {"--warmup", "on", "--warmup-request", bad.dump()}, "failed");
    ASSERT_TRUE(s.up());
    const json health = wait_warm(s);
    EXPECT_EQ(health["status"], "ok");
    EXPECT_EQ(health["warm_up"]["state"], "failed") << health.dump();
    EXPECT_NE(health["warm_up"].value("error", "").find("size"), std::string::npos) << health.dump();
    EXPECT_NE(s.stderr_text().find("warm-up failed"), std::string::npos) << s.stderr_text();
    const auto [latents, metrics] = run_job(s);
    EXPECT_FALSE(latents.empty());
    EXPECT_EQ(s.terminate(), 0);
}

// SIGTERM while the warm-up runs (a large one: some 30,000 rows on the tiny DiT, minutes on the CPU): the
// warm-up stops at its next cancellation check and the server exits cleanly.
TEST(ServeWarmUp, SigtermCancelsARunningWarmUp) {
    fs::remove_all(kWork / "term_out");
    json big = tiny_job();
    big["size"] = "1024x512";
    big["seconds"] = 10;
    Server s(kWork / "term_out", {"--warmup", "on", "--warmup-request", big.dump()}, "term");
    ASSERT_TRUE(s.up());
    auto c = s.client();
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    json h;
    while (std::chrono::steady_clock::now() < deadline) {
        auto r = c.Get("/health");
        h = body_json(r);
        if (h["warm_up"].value("state", "") == "running") break;
        std::this_thread::sleep_for(20ms);
    }
    ASSERT_EQ(h["warm_up"]["state"], "running") << h.dump();
    EXPECT_EQ(h["status"], "warming_up");
    std::this_thread::sleep_for(300ms); // into the forward
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(s.terminate(30s), 0) << s.stderr_text();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);
    EXPECT_NE(s.stderr_text().find("warm-up cancelled"), std::string::npos) << s.stderr_text();
}

TEST(ServeWarmUp, UnreadableWarmUpRequestStopsTheCommand) {
    fs::remove_all(kWork / "unreadable_out");
    Server s(kWork / "unreadable_out", {"--warmup", "on", "--warmup-request", "{\"prompt\": "}, "unreadable",
             {}, false);
    EXPECT_FALSE(s.up());
    EXPECT_NE(s.exit_status(), 0);
    EXPECT_NE(s.stderr_text().find("--warmup-request"), std::string::npos) << s.stderr_text();
}

#endif
