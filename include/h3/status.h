// Recoverable errors: Status / Result<T>, part of the public API (h3/engine.h returns them). Programming
// errors use H3_CHECK (src/core/check.h). A Status about one request or engine option carries that option's
// name in field() ("size", "num_inference_steps", "gpu_memory_budget"): each front end maps it to its own
// spelling (the CLI to a flag, HTTP to `param`, Python to ValueError.field) — messages never name a flag.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace h3 {

enum class ErrorCode {
    kOk = 0,
    kInvalidArgument, // bad request field, bad CLI value, wrong shape
    kBadInput,        // malformed file: truncated, bad header, missing tensor
    kNotFound,        // a file or tensor that should exist does not
    kIoError,         // the OS refused (open, read, mmap)
    kOutOfMemory,
    kUnimplemented,
    kCancelled,
    kInternal,
};

const char* error_code_name(ErrorCode code);

class [[nodiscard]] Status {
public:
    Status() = default;
    Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

    static Status ok_status() { return Status(); }
    bool ok() const { return code_ == ErrorCode::kOk; }
    ErrorCode code() const { return code_; }
    const std::string& message() const { return message_; }
    // "bad_input: file x.safetensors: tensor 'w': ..."
    std::string to_string() const;
    // Returns a copy with `context` prepended ("context: message"); the field stays.
    Status with_context(const std::string& context) const;
    // The request field or engine option the error is about ("" when none is known).
    const std::string& field() const { return field_; }
    // A copy naming `field` (an OK status stays OK and names nothing).
    Status with_field(std::string field) const {
        Status s = *this;
        if (!s.ok()) s.field_ = std::move(field);
        return s;
    }

private:
    ErrorCode code_ = ErrorCode::kOk;
    std::string message_;
    std::string field_;
};

inline Status ok_status() {
    return Status();
}
inline Status invalid_argument(std::string m) {
    return {ErrorCode::kInvalidArgument, std::move(m)};
}
// invalid_argument about `field` (the message should still say what is wrong in words).
inline Status invalid_field(std::string field, std::string m) {
    return Status(ErrorCode::kInvalidArgument, std::move(m)).with_field(std::move(field));
}
inline Status bad_input(std::string m) {
    return {ErrorCode::kBadInput, std::move(m)};
}
inline Status not_found(std::string m) {
    return {ErrorCode::kNotFound, std::move(m)};
}
inline Status io_error(std::string m) {
    return {ErrorCode::kIoError, std::move(m)};
}
inline Status out_of_memory(std::string m) {
    return {ErrorCode::kOutOfMemory, std::move(m)};
}
inline Status unimplemented(std::string m) {
    return {ErrorCode::kUnimplemented, std::move(m)};
}
inline Status cancelled(std::string m) {
    return {ErrorCode::kCancelled, std::move(m)};
}
inline Status internal_error(std::string m) {
    return {ErrorCode::kInternal, std::move(m)};
}

template <typename T> class [[nodiscard]] Result {
public:
    Result(T value) : value_(std::move(value)) {}
    Result(Status status)
        : status_(status.ok() ? internal_error("Result constructed from an OK status without a value")
                              : std::move(status)) {}

    bool ok() const { return value_.has_value(); }
    const Status& status() const { return status_; }
    T& value() & { return *value_; }
    const T& value() const& { return *value_; }
    T&& value() && { return std::move(*value_); }
    T* operator->() { return &*value_; }
    const T* operator->() const { return &*value_; }
    T& operator*() { return *value_; }

private:
    std::optional<T> value_;
    Status status_;
};

} // namespace h3

#define H3_CONCAT_INNER(a, b) a##b
#define H3_CONCAT(a, b) H3_CONCAT_INNER(a, b)

// Propagate a non-OK Status.
#define H3_TRY(expr)                                                                                         \
    do {                                                                                                     \
        ::h3::Status h3_try_status_ = (expr);                                                                \
        if (!h3_try_status_.ok()) return h3_try_status_;                                                     \
    } while (0)

// `H3_ASSIGN_OR_RETURN(auto x, make_x());`
#define H3_ASSIGN_OR_RETURN(lhs, expr) H3_ASSIGN_OR_RETURN_IMPL(H3_CONCAT(h3_result_, __LINE__), lhs, expr)
#define H3_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr)                                                             \
    auto tmp = (expr);                                                                                       \
    if (!tmp.ok()) return tmp.status();                                                                      \
    lhs = std::move(tmp).value()
