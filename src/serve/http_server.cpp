#include "serve/http_server.h"
#include "serve/warm_up.h"

#include "core/log.h"
#include "core/strict_int.h"
#include "core/utf8.h"
#include "serve/body_decoder.h"
#include "serve/byte_range.h"
#include "serve/request_target.h"
#include "serve/sse.h"
#include "serve/web/web_assets.h"
#include "serve/wire/model_object.h"

#include <microhttpd.h>

#include <arpa/inet.h>
#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <deque>
#include <fcntl.h>
#include <functional>
#include <mutex>
#include <netdb.h>
#include <optional>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace h3::serve {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr auto kWakeInterval = std::chrono::milliseconds(100); // parked connections are checked this often
constexpr size_t kConnectionMemory = 64 * 1024;    // per connection: request line + headers + read buffer
constexpr uint64_t kMaxDiscardBytes = 64ull << 20; // a refused body up to this size is read and dropped

int64_t now_seconds() {
    return static_cast<int64_t>(std::time(nullptr));
}

std::string dump(const json& j) {
    return j.dump(-1, ' ', false, json::error_handler_t::replace); // never throws on client text
}

// Client text as it may appear in a message: valid UTF-8, no control characters, at most 80 bytes.
std::string shown(std::string_view s) {
    std::string t = sanitized_utf8(s.substr(0, 80));
    return s.size() > 80 ? t + "..." : t;
}

// What a route answers.
struct Response {
    int status = 200;
    std::string content_type = "application/json";
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;
    int fd = -1; // a file to send (owned), `length` bytes from `offset`
    uint64_t offset = 0, length = 0;
    bool close = false; // Connection: close (the rest of the request was not read)

    Response() = default;
    Response(Response&& o) noexcept { *this = std::move(o); }
    Response& operator=(Response&& o) noexcept {
        if (this != &o) {
            if (fd >= 0) ::close(fd);
            status = o.status;
            content_type = std::move(o.content_type);
            body = std::move(o.body);
            headers = std::move(o.headers);
            fd = o.fd;
            offset = o.offset;
            length = o.length;
            close = o.close;
            o.fd = -1;
        }
        return *this;
    }
    ~Response() {
        if (fd >= 0) ::close(fd);
    }
};

const char* error_type(int status) {
    if (status == 401) return "authentication_error";
    if (status == 429) return "rate_limit_error";
    if (status >= 500) return "server_error";
    return "invalid_request_error";
}

Response error_response(int status, const std::string& message, const std::string& param = "",
                        const std::string& code = "") {
    json e = {{"message", message},
              {"type", error_type(status)},
              {"param", param.empty() ? json(nullptr) : json(param)},
              {"code", code.empty() ? json(nullptr) : json(code)}};
    Response r;
    r.status = status;
    r.body = dump(json{{"error", e}});
    return r;
}

Response json_response(const json& j, int status = 200) {
    Response r;
    r.status = status;
    r.body = dump(j);
    return r;
}

// The status of a submission that did not parse: the client's fault unless the server failed.
int parse_error_status(ErrorCode code) {
    return code == ErrorCode::kIoError || code == ErrorCode::kInternal ? 500 : 400;
}

// A file with its Content-Length, or the one byte range the Range header asks for.
std::optional<Response> file_response(const std::string& path, const std::string& content_type,
                                      const std::string& download_name, std::string_view range_header) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return std::nullopt;
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        return std::nullopt;
    }
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    Response r;
    r.fd = fd;
    r.content_type = content_type;
    r.headers.emplace_back("Content-Disposition", "attachment; filename=\"" + download_name + "\"");
    r.headers.emplace_back("Accept-Ranges", "bytes");
    const ByteRange br = resolve_byte_range(range_header, size);
    if (br.kind == ByteRange::Kind::kUnsatisfiable) {
        Response e =
            error_response(416, "range not satisfiable: the file has " + std::to_string(size) + " bytes",
                           "Range", "range_not_satisfiable");
        e.headers.emplace_back("Content-Range", content_range_value(br, size));
        return e;
    }
    if (br.kind == ByteRange::Kind::kPartial) {
        r.status = 206;
        r.offset = br.offset;
        r.length = br.length;
        r.headers.emplace_back("Content-Range", content_range_value(br, size));
    } else {
        r.length = size;
    }
    return r;
}

bool constant_time_equal(const std::string& a, const std::string& b) {
    if (a.size() != b.size()) return false;
    unsigned char diff = 0;
    for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
    return diff == 0;
}

// A few threads with a bounded queue (submission parsing).
class TaskPool {
public:
    TaskPool(int threads, size_t max_queue) : max_queue_(max_queue) {
        for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { loop(); });
    }
    ~TaskPool() { shutdown(); }
    bool try_push(std::function<void()> task) {
        std::lock_guard<std::mutex> lock(mu_);
        if (closed_ || queue_.size() >= max_queue_) return false;
        queue_.push_back(std::move(task));
        cv_.notify_one();
        return true;
    }
    // Runs what is queued, then joins.
    void shutdown() {
        {
            std::lock_guard<std::mutex> lock(mu_);
            closed_ = true;
            cv_.notify_all();
        }
        for (auto& t : threads_)
            if (t.joinable()) t.join();
    }

private:
    void loop() {
        for (;;) {
            std::function<void()> task;
            {
                std::unique_lock<std::mutex> lock(mu_);
                cv_.wait(lock, [&] { return closed_ || !queue_.empty(); });
                if (queue_.empty()) return;
                task = std::move(queue_.front());
                queue_.pop_front();
            }
            task();
        }
    }
    const size_t max_queue_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::function<void()>> queue_;
    std::vector<std::thread> threads_;
    bool closed_ = false;
};

enum class Route {
    kHealth,
    kMetrics,
    kList,
    kSubmit,
    kSync,
    kGet,
    kContent,
    kEvents,
    kCancel,
    kDelete,
    kWebPage, // the embedded page (serve/web): /, /web/*
    kModels,  // GET /v1/models: the loaded model and its defaults
    kNone
};

struct Target {
    Route route = Route::kNone;
    std::string id;
};

Target match(const std::string& method, const std::string& path) {
    const bool get = method == MHD_HTTP_METHOD_GET || method == MHD_HTTP_METHOD_HEAD;
    const bool post = method == MHD_HTTP_METHOD_POST;
    if (path == "/health" && get) return {Route::kHealth, {}};
    if (path == "/metrics" && get) return {Route::kMetrics, {}};
    if (get && is_web_asset_path(path)) return {Route::kWebPage, {}};
    if (path == "/v1/models" && get) return {Route::kModels, {}};
    if (path == "/v1/videos") return {get ? Route::kList : post ? Route::kSubmit : Route::kNone, {}};
    if (path == "/v1/videos/sync" && post) return {Route::kSync, {}};
    const std::string prefix = "/v1/videos/";
    if (path.rfind(prefix, 0) != 0) return {};
    const std::string rest = path.substr(prefix.size());
    const size_t slash = rest.find('/');
    const std::string id = rest.substr(0, slash);
    if (id.empty()) return {};
    if (slash == std::string::npos) {
        if (get) return {Route::kGet, id};
        if (method == MHD_HTTP_METHOD_DELETE) return {Route::kDelete, id};
        return {};
    }
    const std::string tail = rest.substr(slash + 1);
    if (tail == "content" && get) return {Route::kContent, id};
    if (tail == "events" && get) return {Route::kEvents, id};
    if (tail == "cancel" && post) return {Route::kCancel, id};
    return {};
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

} // namespace

// ---------------------------------------------------------------------------------------------------------
struct HttpServer::Impl {
    Impl(JobBoard& b, const JobStore& s, Metrics& m, const pipeline::JobBuilder& jb, HttpOptions o)
        : board(b), store(s), metrics(m), builder(jb), opt(std::move(o)),
          pool(std::max(1, opt.parse_threads), static_cast<size_t>(std::max(1, opt.max_parse_queue))) {}

    // One request on one connection (MHD's per-request pointer).
    struct Exchange {
        Impl* impl = nullptr;
        MHD_Connection* conn = nullptr;
        std::string method;
        std::string raw_target; // as the request line spelled it (MHD's own `url` stops at an encoded NUL)
        ParsedTarget parsed;    // the decoded path and query parameters, or why they were refused
        bool started = false;   // begin() ran
        Target target;
        enum class Phase { kBody, kParsing, kParsed, kSyncWait } phase = Phase::kBody;
        std::unique_ptr<BodyDecoder> decoder;
        std::string content_type;
        int64_t buffered = 0; // bytes counted against max_buffered_body_bytes
        Clock::time_point deadline = Clock::time_point::max();
        std::optional<Response> rejected; // the body is being discarded; this answers it
        std::optional<Response> response; // set by the parse task
        std::shared_ptr<Job> sync_job;
        bool holds_sync_slot = false;
        bool has_body = false; // Content-Length > 0 (up to kMaxDiscardBytes) or chunked

        ~Exchange() {
            if (buffered) impl->buffered_bytes.fetch_sub(buffered);
            if (holds_sync_slot) impl->sync_waiters.fetch_sub(1);
        }
        void drop_body() {
            if (decoder) decoder.reset();
            if (buffered) impl->buffered_bytes.fetch_sub(buffered);
            buffered = 0;
        }
    };

    // An event stream being sent (the content reader's closure).
    struct EventStream {
        Impl* impl;
        MHD_Connection* conn;
        JobEventStream stream;
        std::string pending;
        size_t sent = 0;
    };

    // A connection parked (suspended) until its job changes.
    struct Parked {
        MHD_Connection* conn;
        EventStream* stream = nullptr; // an event stream, or
        Exchange* sync = nullptr;      // a sync request waiting for its job to end
    };

    // ---- MHD glue
    static void* on_uri(void* cls, const char* uri, MHD_Connection* conn);
    static MHD_Result on_request(void* cls, MHD_Connection* conn, const char* url, const char* method,
                                 const char* /*version*/, const char* upload, size_t* upload_size,
                                 void** req_cls);
    static void on_completed(void* cls, MHD_Connection*, void** req_cls, MHD_RequestTerminationCode);
    static ssize_t on_event_read(void* cls, uint64_t pos, char* buf, size_t max);
    static void on_event_free(void* cls);
    static void on_log(void*, const char* fmt, va_list ap);

    MHD_Result begin(Exchange& ex);
    // Answers a request at its start: at once when it has no body (or one too large to read), else after its
    // body has been read and discarded (answering over an unread body would make the kernel reset the
    // connection under the client).
    MHD_Result answer(Exchange& ex, Response r);
    void on_body(Exchange& ex, const char* data, size_t n);
    MHD_Result complete(Exchange& ex);
    MHD_Result queue(MHD_Connection* conn, Response r);
    void park(Parked p); // the caller is inside an MHD callback of p.conn
    void wake_loop();

    // ---- routes
    std::string header(MHD_Connection* c, const char* name) const {
        const char* v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
        return v ? v : "";
    }
    static std::optional<std::string> arg(const Exchange& ex, const char* name) {
        const std::string* v = ex.parsed.target.param(name);
        if (!v) return std::nullopt;
        return *v;
    }
    std::shared_ptr<Job> lookup(const std::string& id) const {
        return valid_job_id(id) ? board.find(id) : nullptr;
    }
    Response not_found(const std::string& id) const {
        return error_response(404, "no video with id '" + shown(id) + "'", "id", "not_found");
    }
    json snapshot_json(const std::shared_ptr<Job>& job) const {
        return board.wait(job, UINT64_MAX, std::chrono::milliseconds(0)).record.to_json();
    }
    Response health() const;
    Response list(const Exchange& ex) const;
    Response content(const Exchange& ex, const std::string& id) const;
    Response cancel(const std::string& id);
    Response remove(const std::string& id);
    Response refusal(const SubmitResult& r);
    Response sync_result(const Exchange& ex) const;
    void parse(Exchange& ex); // on a pool thread

    JobBoard& board;
    const JobStore& store;
    Metrics& metrics;
    const pipeline::JobBuilder& builder; // validates submissions against the checkpoint the worker runs
    HttpOptions opt;

    MHD_Daemon* daemon = nullptr;
    int listen_fd = -1;
    std::atomic<bool> stopping{false};
    std::atomic<int> event_streams{0}, sync_waiters{0};
    std::atomic<int64_t> buffered_bytes{0};
    TaskPool pool;

    std::mutex park_mu;
    std::vector<Parked> parked;
    std::thread waker;
    std::atomic<bool> waker_quit{false};

    std::mutex stop_mu;
    std::condition_variable stop_cv;
    bool stopped = false;
};

using Impl = HttpServer::Impl;

void Impl::on_log(void*, const char* fmt, va_list ap) {
    char buf[512];
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    H3_LOG_DEBUG("serve: http: {}", buf);
}

MHD_Result Impl::queue(MHD_Connection* conn, Response r) {
    MHD_Response* resp = nullptr;
    if (r.fd >= 0) {
        resp = MHD_create_response_from_fd_at_offset64(r.length, r.fd, r.offset);
        if (resp) r.fd = -1; // the response owns it now
    } else {
        resp = MHD_create_response_from_buffer(r.body.size(), r.body.data(), MHD_RESPMEM_MUST_COPY);
    }
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r.content_type.c_str());
    for (const auto& [k, v] : r.headers) MHD_add_response_header(resp, k.c_str(), v.c_str());
    if (r.close) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    const MHD_Result ret = MHD_queue_response(conn, static_cast<unsigned>(r.status), resp);
    MHD_destroy_response(resp);
    H3_LOG_DEBUG("serve: → {}", r.status);
    return ret;
}

void Impl::park(Parked p) {
    MHD_suspend_connection(p.conn); // before the waker can see it, so it never resumes a running one
    std::lock_guard<std::mutex> lock(park_mu);
    parked.push_back(p);
}

void Impl::wake_loop() {
    std::vector<MHD_Connection*> wake;
    while (!waker_quit.load()) {
        std::this_thread::sleep_for(kWakeInterval);
        const bool stop = stopping.load();
        wake.clear();
        {
            std::lock_guard<std::mutex> lock(park_mu);
            for (size_t i = 0; i < parked.size();) {
                const Parked& p = parked[i];
                bool ready = stop;
                if (!ready && p.stream) ready = p.stream->stream.ready();
                if (!ready && p.sync)
                    ready = api::is_final(
                        board.wait(p.sync->sync_job, UINT64_MAX, std::chrono::milliseconds(0)).record.status);
                if (ready) {
                    wake.push_back(p.conn);
                    parked[i] = parked.back();
                    parked.pop_back();
                } else {
                    ++i;
                }
            }
        }
        // outside the lock: no MHD call is made while holding it
        for (MHD_Connection* c : wake) MHD_resume_connection(c);
    }
}

MHD_Result Impl::on_request(void* cls, MHD_Connection* conn, const char* url, const char* method, const char*,
                            const char* upload, size_t* upload_size, void** req_cls) {
    Impl* s = static_cast<Impl*>(cls);
    auto* ex = static_cast<Exchange*>(*req_cls);
    try {
        if (!ex) { // no URI callback ran (not expected): MHD's decoded url is all there is
            ex = static_cast<Exchange*>(on_uri(s, url, conn));
            *req_cls = ex;
        }
        if (!ex->started) {
            ex->started = true;
            ex->conn = conn;
            ex->method = method;
            return s->begin(*ex);
        }
        if (*upload_size > 0) {
            s->on_body(*ex, upload, *upload_size);
            *upload_size = 0;
            // a body that is too slow is cut off (nothing can be answered while it is still arriving)
            return Clock::now() > ex->deadline ? MHD_NO : MHD_YES;
        }
        return s->complete(*ex);
    } catch (const std::exception& e) {
        H3_LOG_ERROR("serve: {} {}: {}", shown(method), shown(url), e.what());
        return MHD_NO; // closes the connection; the server goes on
    }
}

// MHD's URI log callback: the request target exactly as the request line spelled it, before MHD decodes it
// (its decoded `url` is a C string, cut at an encoded NUL). The Exchange made here is the request's pointer.
// The query is parsed here and not by MHD: libmicrohttpd 0.9.75 stores every query parameter in the
// connection's memory pool, and when the pool runs out (about 1000 parameters in 64 KiB) it queues its error
// answer, ignores the failure and goes on reading headers into the freed buffer — the client hears nothing
// until the idle timeout. Ending MHD's copy of the target at the '?' leaves it no parameter to store.
void* Impl::on_uri(void* cls, const char* uri, MHD_Connection* conn) {
    auto* ex = new Exchange();
    ex->impl = static_cast<Impl*>(cls);
    ex->conn = conn;
    ex->raw_target = uri ? uri : "";
    ex->parsed = parse_request_target(ex->raw_target);
    if (uri) {
        if (const char* q = std::strchr(uri, '?')) const_cast<char*>(q)[1] = '\0'; // MHD's writable buffer
    }
    return ex;
}

void Impl::on_completed(void*, MHD_Connection*, void** req_cls, MHD_RequestTerminationCode) {
    delete static_cast<Exchange*>(*req_cls);
    *req_cls = nullptr;
}

MHD_Result Impl::begin(Exchange& ex) {
    MHD_Connection* c = ex.conn;
    H3_LOG_DEBUG("serve: {} {}", shown(ex.method), shown(ex.raw_target));
    if (ex.parsed.ok()) ex.target = match(ex.method, ex.parsed.target.path);
    {
        const std::string length = header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
        auto n = parse_uint64(length, "Content-Length");
        ex.has_body = (n.ok() && *n > 0 && *n <= kMaxDiscardBytes) ||
                      (length.empty() && !header(c, MHD_HTTP_HEADER_TRANSFER_ENCODING).empty());
    }
    if (!ex.parsed.ok())
        return answer(ex,
                      error_response(ex.parsed.status, ex.parsed.message, "",
                                     ex.parsed.status == 414 ? "uri_too_long" : "invalid_request_target"));
    if (!opt.api_key.empty() && ex.target.route != Route::kHealth && ex.target.route != Route::kWebPage) {
        const std::string auth = header(c, MHD_HTTP_HEADER_AUTHORIZATION);
        const std::string bearer = "Bearer ";
        if (!(auth.rfind(bearer, 0) == 0 && constant_time_equal(auth.substr(bearer.size()), opt.api_key))) {
            Response r = error_response(
                401, auth.empty() ? "missing API key (send Authorization: Bearer KEY)" : "wrong API key", "",
                "invalid_api_key");
            r.headers.emplace_back(MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
            return answer(ex, std::move(r));
        }
    }
    switch (ex.target.route) {
    case Route::kHealth:
        return answer(ex, health());
    case Route::kWebPage: { // static files, no API key needed
        const WebAsset* a = find_web_asset(ex.parsed.target.path);
        Response r;
        r.content_type = std::string(a->content_type);
        r.body = std::string(a->body);
        for (const auto& [name, value] : web_asset_headers()) r.headers.emplace_back(name, value);
        return answer(ex, std::move(r));
    }
    case Route::kMetrics: {
        QueueGauges g{.queue_depth = board.queue_depth(),
                      .queue_capacity = board.max_queue(),
                      .running = board.running(),
                      .accepting = !board.closed()};
        if (opt.replicas) g.replicas = opt.replicas();
        Response r;
        r.content_type = "text/plain; version=0.0.4; charset=utf-8";
        r.body = metrics.render(g);
        return answer(ex, std::move(r));
    }
    case Route::kModels:
        return answer(ex, json_response(api::model_list(builder)));
    case Route::kList:
        return answer(ex, list(ex));
    case Route::kGet: {
        auto job = lookup(ex.target.id);
        return answer(ex, job ? json_response(snapshot_json(job)) : not_found(ex.target.id));
    }
    case Route::kContent:
        return answer(ex, content(ex, ex.target.id));
    case Route::kCancel: // a body, if any, is not read (the connection then closes after the answer)
        return answer(ex, cancel(ex.target.id));
    case Route::kDelete:
        return answer(ex, remove(ex.target.id));
    case Route::kEvents: {
        auto job = lookup(ex.target.id);
        if (!job) return answer(ex, not_found(ex.target.id));
        if (event_streams.fetch_add(1) >= opt.max_event_streams) {
            event_streams.fetch_sub(1);
            Response r =
                error_response(503,
                               "too many event streams open (" + std::to_string(opt.max_event_streams) +
                                   "); poll GET /v1/videos/{id} or retry later",
                               "", "too_many_streams");
            r.headers.emplace_back("Retry-After", "5");
            return answer(ex, std::move(r));
        }
        auto* st = new EventStream{this, c, JobEventStream(board, job), {}, 0};
        MHD_Response* resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 8192, &Impl::on_event_read,
                                                               st, &Impl::on_event_free);
        if (!resp) {
            on_event_free(st);
            return MHD_NO;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        MHD_add_response_header(resp, "X-Accel-Buffering", "no");
        const MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
        return ret;
    }
    case Route::kSubmit:
    case Route::kSync: {
        if (stopping.load() || board.closed())
            return answer(ex, error_response(503, "the server is shutting down and accepts no new jobs", "",
                                             "shutting_down"));
        if (ex.target.route == Route::kSync) {
            if (sync_waiters.fetch_add(1) >= opt.max_sync_waiters) {
                sync_waiters.fetch_sub(1);
                Response r =
                    error_response(503,
                                   "too many sync requests waiting (" + std::to_string(opt.max_sync_waiters) +
                                       "); use POST /v1/videos and poll, or retry later",
                                   "", "too_many_waiters");
                r.headers.emplace_back("Retry-After", "5");
                return answer(ex, std::move(r));
            }
            ex.holds_sync_slot = true;
        }
        const std::string length = header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (!length.empty()) {
            auto n = parse_uint64(length, "Content-Length");
            if (!n.ok()) return answer(ex, error_response(400, n.status().message(), "body"));
            if (*n > opt.max_body_bytes)
                return answer(
                    ex,
                    error_response(413, "the body exceeds " + std::to_string(opt.max_body_bytes) + " bytes",
                                   "body", "payload_too_large"));
        }
        auto dec = BodyDecoder::create(header(c, MHD_HTTP_HEADER_CONTENT_ENCODING), opt.max_body_bytes);
        if (!dec.ok())
            return answer(ex, error_response(415, dec.status().message(), "body", "unsupported_encoding"));
        ex.decoder = std::move(dec).value();
        ex.content_type = header(c, MHD_HTTP_HEADER_CONTENT_TYPE);
        ex.deadline = Clock::now() + std::chrono::seconds(opt.body_timeout_seconds);
        ex.phase = Exchange::Phase::kBody;
        return MHD_YES; // the body follows (MHD answers Expect: 100-continue)
    }
    case Route::kNone:
        break;
    }
    return answer(ex, error_response(404, "no route " + shown(ex.method) + " " + shown(ex.parsed.target.path),
                                     "", "not_found"));
}

MHD_Result Impl::answer(Exchange& ex, Response r) {
    if (!ex.has_body) return queue(ex.conn, std::move(r));
    ex.decoder.reset();
    ex.rejected = std::move(r);
    ex.phase = Exchange::Phase::kBody;
    ex.deadline = Clock::now() + std::chrono::seconds(opt.body_timeout_seconds);
    return MHD_YES;
}

void Impl::on_body(Exchange& ex, const char* data, size_t n) {
    if (ex.rejected || !ex.decoder) return; // discarding what is left of a refused body
    const size_t before = ex.decoder->body().size();
    const Status s = ex.decoder->feed(std::string_view(data, n));
    const int64_t grew = static_cast<int64_t>(ex.decoder->body().size() - before);
    ex.buffered += grew;
    const bool over_budget = buffered_bytes.fetch_add(grew) + grew > opt.max_buffered_body_bytes;
    if (s.ok() && !over_budget) return;
    if (!s.ok() && s.code() == ErrorCode::kOutOfMemory) {
        ex.rejected = error_response(413,
                                     "the body exceeds " + std::to_string(opt.max_body_bytes) +
                                         " bytes (after Content-Encoding is undone)",
                                     "body", "payload_too_large");
    } else if (!s.ok()) {
        ex.rejected = error_response(400, s.message(), "body");
    } else {
        Response r =
            error_response(503, "the server holds too many request bodies at once; retry later", "", "busy");
        r.headers.emplace_back("Retry-After", "2");
        ex.rejected = std::move(r);
    }
    ex.rejected->close = true;
    ex.drop_body(); // the rest of the body is read and discarded
}

MHD_Result Impl::complete(Exchange& ex) {
    MHD_Connection* c = ex.conn;
    switch (ex.phase) {
    case Exchange::Phase::kBody: {
        if (ex.rejected) {
            Response r = std::move(*ex.rejected);
            ex.rejected.reset();
            return queue(c, std::move(r));
        }
        if (!ex.decoder) return MHD_NO;
        if (Status s = ex.decoder->finish(); !s.ok()) {
            ex.drop_body();
            return queue(c, error_response(400, s.message(), "body"));
        }
        ex.phase = Exchange::Phase::kParsing;
        MHD_suspend_connection(c); // resumed by the parse task, which cannot start before this
        if (!pool.try_push([this, &ex] { parse(ex); })) {
            MHD_resume_connection(c);
            ex.drop_body();
            Response r = error_response(503, "too many submissions being parsed; retry later", "", "busy");
            r.headers.emplace_back("Retry-After", "2");
            ex.response = std::move(r);
            ex.phase = Exchange::Phase::kParsed;
        }
        return MHD_YES;
    }
    case Exchange::Phase::kParsing:
        return MHD_YES; // not resumed yet
    case Exchange::Phase::kParsed:
        if (ex.response) {
            Response r = std::move(*ex.response);
            ex.response.reset();
            return queue(c, std::move(r));
        }
        ex.phase = Exchange::Phase::kSyncWait;
        [[fallthrough]];
    case Exchange::Phase::kSyncWait: {
        const JobSnapshot snap = board.wait(ex.sync_job, UINT64_MAX, std::chrono::milliseconds(0));
        if (!api::is_final(snap.record.status) && !stopping.load()) {
            park({c, nullptr, &ex});
            return MHD_YES;
        }
        return queue(c, sync_result(ex));
    }
    }
    return MHD_NO;
}

void Impl::parse(Exchange& ex) {
    std::string field;
    Response r;
    try {
        auto rq = parse_submission(ex.content_type, ex.decoder->body(), opt.limits, builder, field);
        ex.drop_body();
        if (!rq.ok()) {
            metrics.job_rejected("invalid");
            r = error_response(parse_error_status(rq.status().code()), rq.status().message(), field,
                               error_code_name(rq.status().code()));
        } else {
            SubmitResult sr = board.submit(std::move(rq).value(), now_seconds());
            if (sr.outcome != SubmitOutcome::kAccepted)
                r = refusal(sr);
            else if (ex.target.route == Route::kSync)
                ex.sync_job = sr.job;
            else
                r = json_response(sr.record.to_json());
        }
    } catch (const std::exception& e) {
        ex.drop_body();
        r = error_response(500, std::string("internal error: ") + e.what(), "", "internal");
    }
    if (!ex.sync_job) ex.response = std::move(r);
    ex.phase = Exchange::Phase::kParsed;
    MHD_resume_connection(ex.conn);
}

ssize_t Impl::on_event_read(void* cls, uint64_t, char* buf, size_t max) {
    auto* st = static_cast<EventStream*>(cls);
    Impl* s = st->impl;
    if (st->sent >= st->pending.size()) {
        st->pending.clear();
        st->sent = 0;
        switch (st->stream.pull(st->pending, s->stopping.load())) {
        case JobEventStream::Pull::kEnd:
            return MHD_CONTENT_READER_END_OF_STREAM;
        case JobEventStream::Pull::kWait:
            s->park({st->conn, st, nullptr});
            return 0;
        case JobEventStream::Pull::kData:
            break;
        }
    }
    const size_t n = std::min(max, st->pending.size() - st->sent);
    std::memcpy(buf, st->pending.data() + st->sent, n);
    st->sent += n;
    return static_cast<ssize_t>(n);
}

void Impl::on_event_free(void* cls) {
    auto* st = static_cast<EventStream*>(cls);
    st->impl->event_streams.fetch_sub(1);
    delete st;
}

Response Impl::health() const {
    const bool closed = board.closed() || stopping.load();
    const bool warming = !closed && opt.warm_up && opt.warm_up->warming();
    nlohmann::json j = {{"status", closed    ? "stopping"
                                   : warming ? "warming_up"
                                             : "ok"},
                        {"queue_depth", board.queue_depth()},
                        {"queue_capacity", board.max_queue()},
                        {"running", board.running()},
                        {"event_streams", event_streams.load()},
                        {"sync_waiters", sync_waiters.load()},
                        {"placement", opt.placement},
                        {"memory_plan", opt.memory_plan}};
    if (opt.replicas) j["replicas"] = opt.replicas();
    if (opt.warm_up) j["warm_up"] = opt.warm_up->status();
    return json_response(j, closed || warming ? 503 : 200);
}

Response Impl::list(const Exchange& ex) const {
    size_t limit = 20;
    if (auto v = arg(ex, "limit")) {
        auto n = parse_uint64(*v, "limit", 100);
        if (!n.ok() || *n < 1)
            return error_response(400, "limit must be an integer in [1, 100], got '" + shown(*v) + "'",
                                  "limit");
        limit = static_cast<size_t>(*n);
    }
    const std::string order = arg(ex, "order").value_or("desc");
    if (order != "desc" && order != "asc")
        return error_response(400, "order must be desc or asc, got '" + shown(order) + "'", "order");
    const std::string after = arg(ex, "after").value_or("");
    if (!after.empty() && !lookup(after))
        return error_response(400, "after: no video with id '" + shown(after) + "'", "after");
    ListPage page = board.list(limit, after, order == "desc");
    json data = json::array();
    for (const auto& r : page.data) data.push_back(r.to_json());
    return json_response({{"object", "list"},
                          {"data", data},
                          {"first_id", page.data.empty() ? json(nullptr) : json(page.data.front().id)},
                          {"last_id", page.data.empty() ? json(nullptr) : json(page.data.back().id)},
                          {"has_more", page.has_more}});
}

Response Impl::content(const Exchange& ex, const std::string& id) const {
    auto job = lookup(id);
    if (!job) return not_found(id);
    const api::VideoRecord rec = board.wait(job, UINT64_MAX, std::chrono::milliseconds(0)).record;
    const std::string variant = arg(ex, "variant").value_or("video");
    if (variant != "video" && variant != "audio" && variant != "latents")
        return error_response(400, "variant must be video, audio or latents, got '" + shown(variant) + "'",
                              "variant");
    if (rec.status != api::JobStatus::kCompleted)
        return error_response(
            409, "video " + rec.id + " is " + api::job_status_name(rec.status) + ", not completed", "id",
            "not_ready");
    if ((variant == "latents") != (rec.output_format == api::OutputFormat::kLatents))
        return error_response(400,
                              "variant " + variant + ": video " + rec.id + " was made with output_format " +
                                  api::output_format_name(rec.output_format),
                              "variant");
    const ContentFile f = content_file(rec.output_format, variant);
    auto r = file_response(store.content_path(rec.id, f.name), f.type, rec.id + f.extension,
                           header(ex.conn, MHD_HTTP_HEADER_RANGE));
    if (!r) return error_response(404, "the content of " + rec.id + " is gone", "id", "not_found");
    return std::move(*r);
}

Response Impl::cancel(const std::string& id) {
    auto job = lookup(id);
    if (!job) return not_found(id);
    if (!board.cancel(job, now_seconds())) {
        const json rec = snapshot_json(job);
        return error_response(409, "video " + id + " is already " + rec["status"].get<std::string>(), "id",
                              "already_final");
    }
    return json_response(snapshot_json(job));
}

Response Impl::remove(const std::string& id) {
    if (!lookup(id) || !board.remove(id, now_seconds())) return not_found(id);
    return json_response({{"id", id}, {"object", "video.deleted"}, {"deleted", true}});
}

Response Impl::refusal(const SubmitResult& r) {
    switch (r.outcome) {
    case SubmitOutcome::kQueueFull: {
        metrics.job_rejected("queue_full");
        Response e = error_response(429, r.message, "", "queue_full");
        e.headers.emplace_back("Retry-After",
                               std::to_string(static_cast<int>(std::ceil(r.retry_after_seconds))));
        return e;
    }
    case SubmitOutcome::kClosed:
        metrics.job_rejected("closed");
        return error_response(503, r.message, "", "shutting_down");
    default:
        return error_response(500, r.message, "", "store_error");
    }
}

Response Impl::sync_result(const Exchange& ex) const {
    const api::VideoRecord rec = board.wait(ex.sync_job, UINT64_MAX, std::chrono::milliseconds(0)).record;
    Response r;
    if (rec.status == api::JobStatus::kCompleted) {
        const ContentFile cf = content_file(rec.output_format, "video");
        if (auto f = file_response(store.content_path(rec.id, cf.name), cf.type, rec.id + cf.extension, ""))
            r = std::move(*f);
        else
            r = error_response(410, "video " + rec.id + " was deleted before it could be sent", "id", "gone");
    } else {
        const std::string message = rec.error ? rec.error->message : "the job did not complete";
        const std::string code = rec.error ? rec.error->code : "";
        if (rec.status == api::JobStatus::kCancelled)
            r = error_response(409, message, "", code);
        else if (!api::is_final(rec.status))
            r = error_response(503, "the server is stopping", "", "shutting_down");
        else
            r = error_response(code == "out_of_memory" ? 503 : 500, message, "", code);
    }
    r.headers.emplace_back("X-Video-Id", rec.id);
    return r;
}

// ---------------------------------------------------------------------------------------------------------
HttpServer::HttpServer(JobBoard& board, const JobStore& store, Metrics& metrics,
                       const pipeline::JobBuilder& builder, HttpOptions options)
    : impl_(std::make_unique<Impl>(board, store, metrics, builder, std::move(options))) {}

HttpServer::~HttpServer() {
    stop();
}

Result<int> HttpServer::bind() {
    Impl& s = *impl_;
    const HttpOptions& o = s.opt;
    // every open socket is a descriptor: lift the soft limit to what the hard limit allows
    if (struct rlimit rl{}; getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, 65536);
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    addrinfo hints{}, *ai = nullptr;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    const std::string port = std::to_string(o.port);
    if (getaddrinfo(o.host.c_str(), port.c_str(), &hints, &ai) != 0 || !ai)
        return io_error("cannot listen on " + o.host + ":" + port + " (not an address of this machine)");
    int fd = -1;
    for (addrinfo* p = ai; p && fd < 0; p = p->ai_next) {
        fd = ::socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, p->ai_protocol);
        if (fd < 0) continue;
        const int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (::bind(fd, p->ai_addr, p->ai_addrlen) != 0 || ::listen(fd, 511) != 0) {
            ::close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    if (fd < 0)
        return io_error("cannot listen on " + o.host + ":" + port + " (address in use or not available)");
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    const int bound = ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                                                       : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    s.listen_fd = fd;
    s.daemon = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG, 0,
        nullptr, nullptr, &Impl::on_request, &s, MHD_OPTION_LISTEN_SOCKET, static_cast<MHD_socket>(fd),
        MHD_OPTION_THREAD_POOL_SIZE, static_cast<unsigned>(std::max(1, o.poll_threads)),
        MHD_OPTION_CONNECTION_LIMIT, static_cast<unsigned>(std::max(8, o.max_connections)),
        MHD_OPTION_CONNECTION_TIMEOUT, static_cast<unsigned>(std::max(1, o.idle_timeout_seconds)),
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, kConnectionMemory, MHD_OPTION_NOTIFY_COMPLETED,
        &Impl::on_completed, &s, MHD_OPTION_URI_LOG_CALLBACK, &Impl::on_uri, &s, MHD_OPTION_EXTERNAL_LOGGER,
        &Impl::on_log, &s, MHD_OPTION_END);
    if (!s.daemon) {
        ::close(fd);
        s.listen_fd = -1;
        return internal_error("cannot start the HTTP listener (libmicrohttpd) on " + o.host + ":" + port);
    }
    s.waker = std::thread([&s] { s.wake_loop(); });
    return bound;
}

void HttpServer::listen() {
    Impl& s = *impl_;
    std::unique_lock<std::mutex> lock(s.stop_mu);
    s.stop_cv.wait(lock, [&] { return s.stopped || !s.daemon; });
}

void HttpServer::stop() {
    Impl& s = *impl_;
    {
        std::lock_guard<std::mutex> lock(s.stop_mu);
        if (s.stopped || !s.daemon) {
            s.stopped = true;
            s.stop_cv.notify_all();
            return;
        }
    }
    s.stopping.store(true);
    MHD_quiesce_daemon(s.daemon); // no new connections
    s.pool.shutdown();            // queued parses finish and resume their connections
    // parked connections are resumed by the waker (stopping); give them a moment to answer and close
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    for (;;) {
        {
            std::lock_guard<std::mutex> lock(s.park_mu);
            if (s.parked.empty() && s.event_streams.load() == 0 && s.sync_waiters.load() == 0) break;
        }
        if (Clock::now() > deadline) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    s.waker_quit.store(true);
    if (s.waker.joinable()) s.waker.join();
    {
        std::lock_guard<std::mutex> lock(s.park_mu); // nothing may stay suspended across MHD_stop_daemon
        for (const auto& p : s.parked) MHD_resume_connection(p.conn);
        s.parked.clear();
    }
    MHD_stop_daemon(s.daemon);
    s.daemon = nullptr;
    if (s.listen_fd >= 0) ::close(s.listen_fd);
    s.listen_fd = -1;
    std::lock_guard<std::mutex> lock(s.stop_mu);
    s.stopped = true;
    s.stop_cv.notify_all();
}

} // namespace h3::serve
