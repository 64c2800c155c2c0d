#include "serve/http_server.h"

#include "core/log.h"
#include "pipeline/reference_files.h"
#include "serve/sse.h"
#include "serve/web/web_assets.h"

#include <httplib.h>

#include <cmath>
#include <ctime>

#include <filesystem>
#include <fstream>
#include <optional>

namespace fs = std::filesystem;

namespace h3::serve {

namespace {

constexpr auto kWaitSlice = std::chrono::milliseconds(250);

int64_t now_seconds() {
    return static_cast<int64_t>(std::time(nullptr));
}

const char* error_type(int status) {
    if (status == 401) return "authentication_error";
    if (status == 429) return "rate_limit_error";
    if (status >= 500) return "server_error";
    return "invalid_request_error";
}

void send_error(httplib::Response& res, int status, const std::string& message, const std::string& param = "",
                const std::string& code = "") {
    nlohmann::json e = {{"message", message},
                        {"type", error_type(status)},
                        {"param", param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param)},
                        {"code", code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code)}};
    res.status = status;
    res.set_content(nlohmann::json{{"error", e}}.dump(), "application/json");
}

void send_json(httplib::Response& res, const nlohmann::json& j, int status = 200) {
    res.status = status;
    res.set_content(j.dump(), "application/json");
}

// Streams a file from disk with its Content-Length (the file stays readable even if deleted meanwhile).
bool send_file(httplib::Response& res, const std::string& path, const std::string& content_type,
               const std::string& download_name) {
    auto in = std::make_shared<std::ifstream>(path, std::ios::binary);
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    if (!*in || ec) return false;
    res.status = 200;
    res.set_header("Content-Disposition", "attachment; filename=\"" + download_name + "\"");
    res.set_content_provider(static_cast<size_t>(size), content_type,
                             [in](size_t offset, size_t length, httplib::DataSink& sink) {
                                 char buf[1 << 16];
                                 in->seekg(static_cast<std::streamoff>(offset));
                                 const size_t n = std::min(length, sizeof buf);
                                 in->read(buf, static_cast<std::streamsize>(n));
                                 const auto got = static_cast<size_t>(in->gcount());
                                 if (got == 0) return false;
                                 return sink.write(buf, got);
                             });
    return true;
}

// Multipart form fields (the OpenAI SDK posts videos as multipart/form-data) → the JSON body schema.
// Numbers arrive as text; `cache` may carry JSON. The parts `first_frame` and `last_frame` are fl2va keyframe
// uploads: their bytes are decoded as an image (PNG/JPEG/WebP, within limits.image) — never read as a path or
// URL; other file parts are refused.
struct FormKeyframes {
    std::optional<io::DecodedImage> first, last;
    std::vector<pipeline::ReferenceMedia> references; // `reference` parts (ref2va), in upload order
};

Result<nlohmann::json> form_to_json(const httplib::Request& req, const api::WireLimits& limits,
                                    FormKeyframes& keyframes, std::string& bad_field) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [name, part] : req.files) {
        if (name == "first_frame" || name == "last_frame") {
            std::optional<io::DecodedImage>& slot = name == "first_frame" ? keyframes.first : keyframes.last;
            if (slot) {
                bad_field = name;
                return invalid_argument(name + ": given more than once");
            }
            auto im = io::decode_image(reinterpret_cast<const uint8_t*>(part.content.data()),
                                       part.content.size(), name, limits.image);
            if (!im.ok()) {
                bad_field = name;
                const std::string& m = im.status().message();
                if (m.rfind(name, 0) == 0) return im.status();
                return Status(im.status().code(), name + ": " + m);
            }
            slot = std::move(im).value();
            continue;
        }
        if (name == "reference") { // repeatable; multimap keeps equal keys in upload order
            if (keyframes.references.size() >= static_cast<size_t>(limits.max_reference_parts)) {
                bad_field = name;
                return invalid_argument("reference: more than " + std::to_string(limits.max_reference_parts) +
                                        " uploads");
            }
            const std::string label = "reference " + std::to_string(keyframes.references.size() + 1) +
                                      (part.filename.empty() ? std::string() : " (" + part.filename + ")");
            auto r = pipeline::decode_reference(part.content, label);
            if (!r.ok()) {
                bad_field = name;
                return r.status();
            }
            keyframes.references.push_back(std::move(r).value());
            continue;
        }
        if (!part.filename.empty()) {
            bad_field = name;
            return invalid_argument(name + ": file parts are accepted only as first_frame and last_frame "
                                           "(keyframes) and reference (ref2va)");
        }
        const std::string& v = part.content;
        if ((name == "seed" || name == "num_inference_steps") && !v.empty() &&
            v.find_first_not_of("0123456789") == std::string::npos && v.size() < 19) {
            j[name] = static_cast<uint64_t>(std::stoull(v));
        } else if (name == "cache" && !v.empty() && v.front() == '{') {
            nlohmann::json c = nlohmann::json::parse(v, nullptr, false);
            if (c.is_discarded()) {
                bad_field = "cache";
                return invalid_argument("cache: not valid JSON");
            }
            j[name] = c;
        } else {
            j[name] = v;
        }
    }
    return j;
}

// Parses the body of a submission (JSON or multipart form) and builds the job against the checkpoint.
Result<api::VideoRequest> parse_submission(const httplib::Request& req, const api::WireLimits& limits,
                                           const pipeline::JobBuilder& builder, std::string& bad_field) {
    Result<api::WireRequest> wire = invalid_argument("body: empty");
    if (req.is_multipart_form_data()) {
        FormKeyframes kf;
        auto j = form_to_json(req, limits, kf, bad_field);
        if (!j.ok()) return j.status();
        wire = api::read_video_body(*j, &bad_field);
        if (wire.ok()) {
            wire->input.first_frame = std::move(kf.first);
            wire->input.last_frame = std::move(kf.last);
            wire->input.references = std::move(kf.references);
        }
    } else {
        wire = api::read_video_body_text(req.body, &bad_field);
    }
    if (!wire.ok()) return wire.status();
    return api::build_video_request(std::move(wire).value(), builder, &bad_field);
}

// A submission the board refused, as an HTTP error.
void send_refusal(httplib::Response& res, const SubmitResult& r, Metrics& metrics) {
    switch (r.outcome) {
    case SubmitOutcome::kQueueFull:
        metrics.job_rejected("queue_full");
        res.set_header("Retry-After", std::to_string(static_cast<int>(std::ceil(r.retry_after_seconds))));
        send_error(res, 429, r.message, "", "queue_full");
        return;
    case SubmitOutcome::kClosed:
        metrics.job_rejected("closed");
        send_error(res, 503, r.message, "", "shutting_down");
        return;
    default:
        send_error(res, 500, r.message, "", "store_error");
        return;
    }
}

// The file a completed job serves for `variant`: a WAV job's content is its audio whatever the variant, a
// latents job's its safetensors.
struct ContentFile {
    const char* name;
    const char* type;
    const char* extension;
};
ContentFile content_file(api::OutputFormat format, const std::string& variant) {
    if (format == api::OutputFormat::kLatents)
        return {api::kLatentsFile, api::output_content_type(format), ".safetensors"};
    if (format == api::OutputFormat::kMp4 && variant == "video")
        return {api::kVideoFile, "video/mp4", ".mp4"};
    return {api::kAudioFile, "audio/wav", ".wav"};
}

// Compares in time independent of where the strings differ (the length is not secret).
bool constant_time_equal(const std::string& a, const std::string& b) {
    if (a.size() != b.size()) return false;
    unsigned char diff = 0;
    for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
    return diff == 0;
}

} // namespace

HttpServer::HttpServer(JobBoard& board, const JobStore& store, Metrics& metrics,
                       const pipeline::JobBuilder& builder, HttpOptions options)
    : board_(board), store_(store), metrics_(metrics), builder_(builder), options_(std::move(options)),
      svr_(std::make_unique<httplib::Server>()) {
    const size_t threads = static_cast<size_t>(std::max(4, options_.threads));
    svr_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    svr_->set_payload_max_length(options_.max_body_bytes);
    routes();
}

HttpServer::~HttpServer() = default;

Result<int> HttpServer::bind() {
    const int port = options_.port == 0
                         ? svr_->bind_to_any_port(options_.host)
                         : (svr_->bind_to_port(options_.host, options_.port) ? options_.port : -1);
    if (port < 0)
        return io_error("cannot listen on " + options_.host + ":" + std::to_string(options_.port) +
                        " (address in use or not available)");
    return port;
}

void HttpServer::listen() {
    svr_->listen_after_bind();
}

// The embedded page (serve/web): static files, no API key needed.
static void serve_web_page(const httplib::Request& req, httplib::Response& res) {
    const WebAsset* a = find_web_asset(req.path);
    if (!a) return send_error(res, 404, "no page " + req.path, "", "not_found");
    for (const auto& [name, value] : web_asset_headers())
        res.set_header(std::string(name), std::string(value));
    res.set_content(std::string(a->body), std::string(a->content_type));
}

void HttpServer::stop() {
    stopping_.store(true);
    svr_->stop();
}

void HttpServer::routes() {
    httplib::Server& s = *svr_;
    const std::string key = options_.api_key;

    s.set_pre_routing_handler([key](const httplib::Request& req, httplib::Response& res) {
        if (key.empty() || req.path == "/health" || is_web_asset_path(req.path))
            return httplib::Server::HandlerResponse::Unhandled;
        const std::string auth = req.get_header_value("Authorization");
        const std::string bearer = "Bearer ";
        if (auth.rfind(bearer, 0) == 0 && constant_time_equal(auth.substr(bearer.size()), key))
            return httplib::Server::HandlerResponse::Unhandled;
        res.set_header("WWW-Authenticate", "Bearer");
        send_error(res, 401,
                   auth.empty() ? "missing API key (send Authorization: Bearer KEY)" : "wrong API key", "",
                   "invalid_api_key");
        return httplib::Server::HandlerResponse::Handled;
    });
    // Errors httplib produces itself (unknown route, body too large, bad request line) get a JSON body too.
    const size_t max_body = options_.max_body_bytes;
    s.set_error_handler(
        httplib::Server::HandlerWithResponse([max_body](const httplib::Request& req, httplib::Response& res) {
            if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
            if (res.status == 404)
                send_error(res, 404, "no route " + req.method + " " + req.path, "", "not_found");
            else if (res.status == 413)
                send_error(res, 413, "the body exceeds " + std::to_string(max_body) + " bytes", "body",
                           "payload_too_large");
            else
                send_error(res, res.status, "request failed with HTTP " + std::to_string(res.status));
            return httplib::Server::HandlerResponse::Handled;
        }));
    s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
            if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
            what = e.what();
        } catch (...) {
        }
        send_error(res, 500, "internal error: " + what, "", "internal");
    });
    s.set_logger([](const httplib::Request& req, const httplib::Response& res) {
        H3_LOG_DEBUG("serve: {} {} → {}", req.method, req.path, res.status);
    });

    // Looks a job up from the path's first capture; answers 404 itself.
    const auto lookup = [this](const httplib::Request& req, httplib::Response& res) -> std::shared_ptr<Job> {
        const std::string id = req.matches[1];
        std::shared_ptr<Job> job = valid_job_id(id) ? board_.find(id) : nullptr;
        if (!job) send_error(res, 404, "no video with id '" + id + "'", "id", "not_found");
        return job;
    };
    const auto snapshot_json = [this](const std::shared_ptr<Job>& job) {
        return board_.wait(job, UINT64_MAX, std::chrono::milliseconds(0)).record.to_json();
    };

    s.Get(R"(/|/index\.html|/web/[A-Za-z0-9_.-]+)", serve_web_page);
    s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
        const bool closed = board_.closed();
        send_json(res,
                  {{"status", closed ? "stopping" : "ok"},
                   {"queue_depth", board_.queue_depth()},
                   {"queue_capacity", board_.max_queue()},
                   {"running", board_.running()}},
                  closed ? 503 : 200);
    });
    s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
        QueueGauges g{.queue_depth = board_.queue_depth(),
                      .queue_capacity = board_.max_queue(),
                      .running = board_.running(),
                      .accepting = !board_.closed()};
        res.set_content(metrics_.render(g), "text/plain; version=0.0.4; charset=utf-8");
    });

    s.Post("/v1/videos", [this](const httplib::Request& req, httplib::Response& res) {
        std::string field;
        auto rq = parse_submission(req, options_.limits, builder_, field);
        if (!rq.ok()) {
            metrics_.job_rejected("invalid");
            send_error(res, 400, rq.status().message(), field, error_code_name(rq.status().code()));
            return;
        }
        SubmitResult r = board_.submit(std::move(rq).value(), now_seconds());
        if (r.outcome != SubmitOutcome::kAccepted) return send_refusal(res, r, metrics_);
        send_json(res, r.record.to_json());
    });

    s.Post("/v1/videos/sync", [this](const httplib::Request& req, httplib::Response& res) {
        std::string field;
        auto rq = parse_submission(req, options_.limits, builder_, field);
        if (!rq.ok()) {
            metrics_.job_rejected("invalid");
            send_error(res, 400, rq.status().message(), field, error_code_name(rq.status().code()));
            return;
        }
        SubmitResult r = board_.submit(std::move(rq).value(), now_seconds());
        if (r.outcome != SubmitOutcome::kAccepted) return send_refusal(res, r, metrics_);
        JobSnapshot snap{r.record, 0, 0, 0};
        while (!api::is_final(snap.record.status) && !stopping_.load())
            snap = board_.wait(r.job, snap.version, kWaitSlice);
        const api::VideoRecord& rec = snap.record;
        res.set_header("X-Video-Id", rec.id);
        if (rec.status == api::JobStatus::kCompleted) {
            const ContentFile f = content_file(rec.output_format, "video");
            if (send_file(res, store_.content_path(rec.id, f.name), f.type, rec.id + f.extension)) return;
            return send_error(res, 410, "video " + rec.id + " was deleted before it could be sent", "id",
                              "gone");
        }
        const std::string message = rec.error ? rec.error->message : "the job did not complete";
        const std::string code = rec.error ? rec.error->code : "";
        if (rec.status == api::JobStatus::kCancelled) return send_error(res, 409, message, "", code);
        if (!api::is_final(rec.status))
            return send_error(res, 503, "the server is stopping", "", "shutting_down");
        send_error(res, code == "out_of_memory" ? 503 : 500, message, "", code);
    });

    s.Get("/v1/videos", [this](const httplib::Request& req, httplib::Response& res) {
        size_t limit = 20;
        if (req.has_param("limit")) {
            const std::string v = req.get_param_value("limit");
            if (v.empty() || v.size() > 4 || v.find_first_not_of("0123456789") != std::string::npos ||
                std::stoi(v) < 1 || std::stoi(v) > 100)
                return send_error(res, 400, "limit must be an integer in [1, 100], got '" + v + "'", "limit");
            limit = static_cast<size_t>(std::stoi(v));
        }
        const std::string order = req.has_param("order") ? req.get_param_value("order") : "desc";
        if (order != "desc" && order != "asc")
            return send_error(res, 400, "order must be desc or asc, got '" + order + "'", "order");
        const std::string after = req.get_param_value("after");
        if (!after.empty() && !board_.find(after))
            return send_error(res, 400, "after: no video with id '" + after + "'", "after");
        ListPage page = board_.list(limit, after, order == "desc");
        nlohmann::json data = nlohmann::json::array();
        for (const auto& r : page.data) data.push_back(r.to_json());
        send_json(
            res,
            {{"object", "list"},
             {"data", data},
             {"first_id", page.data.empty() ? nlohmann::json(nullptr) : nlohmann::json(page.data.front().id)},
             {"last_id", page.data.empty() ? nlohmann::json(nullptr) : nlohmann::json(page.data.back().id)},
             {"has_more", page.has_more}});
    });

    s.Get(R"(/v1/videos/([^/]+))",
          [lookup, snapshot_json](const httplib::Request& req, httplib::Response& res) {
              if (auto job = lookup(req, res)) send_json(res, snapshot_json(job));
          });

    s.Get(R"(/v1/videos/([^/]+)/content)", [this, lookup](const httplib::Request& req,
                                                          httplib::Response& res) {
        auto job = lookup(req, res);
        if (!job) return;
        const api::VideoRecord rec = board_.wait(job, UINT64_MAX, std::chrono::milliseconds(0)).record;
        const std::string variant = req.has_param("variant") ? req.get_param_value("variant") : "video";
        if (variant != "video" && variant != "audio" && variant != "latents")
            return send_error(res, 400, "variant must be video, audio or latents, got '" + variant + "'",
                              "variant");
        if (rec.status != api::JobStatus::kCompleted)
            return send_error(
                res, 409, "video " + rec.id + " is " + api::job_status_name(rec.status) + ", not completed",
                "id", "not_ready");
        if ((variant == "latents") != (rec.output_format == api::OutputFormat::kLatents))
            return send_error(res, 400,
                              "variant " + variant + ": video " + rec.id + " was made with output_format " +
                                  api::output_format_name(rec.output_format),
                              "variant");
        const ContentFile f = content_file(rec.output_format, variant);
        if (!send_file(res, store_.content_path(rec.id, f.name), f.type, rec.id + f.extension))
            send_error(res, 404, "the content of " + rec.id + " is gone", "id", "not_found");
    });

    s.Get(R"(/v1/videos/([^/]+)/events)",
          [this, lookup](const httplib::Request& req, httplib::Response& res) {
              if (auto job = lookup(req, res)) stream_job_events(res, board_, job, stopping_);
          });

    s.Post(R"(/v1/videos/([^/]+)/cancel)", [this, lookup, snapshot_json](const httplib::Request& req,
                                                                         httplib::Response& res) {
        auto job = lookup(req, res);
        if (!job) return;
        if (!board_.cancel(job, now_seconds())) {
            const auto rec = snapshot_json(job);
            return send_error(res, 409,
                              "video " + job->record.id + " is already " + rec["status"].get<std::string>(),
                              "id", "already_final");
        }
        send_json(res, snapshot_json(job));
    });

    s.Delete(R"(/v1/videos/([^/]+))", [this, lookup](const httplib::Request& req, httplib::Response& res) {
        auto job = lookup(req, res);
        if (!job) return;
        const std::string id = req.matches[1];
        if (!board_.remove(id, now_seconds()))
            return send_error(res, 404, "no video with id '" + id + "'", "id");
        send_json(res, {{"id", id}, {"object", "video.deleted"}, {"deleted", true}});
    });
}

} // namespace h3::serve
