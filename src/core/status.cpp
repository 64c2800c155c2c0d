#include "core/status.h"

namespace h3 {

const char* error_code_name(ErrorCode code) {
    switch (code) {
    case ErrorCode::kOk:
        return "ok";
    case ErrorCode::kInvalidArgument:
        return "invalid_argument";
    case ErrorCode::kBadInput:
        return "bad_input";
    case ErrorCode::kNotFound:
        return "not_found";
    case ErrorCode::kIoError:
        return "io_error";
    case ErrorCode::kOutOfMemory:
        return "out_of_memory";
    case ErrorCode::kUnimplemented:
        return "unimplemented";
    case ErrorCode::kCancelled:
        return "cancelled";
    case ErrorCode::kInternal:
        return "internal";
    }
    return "unknown";
}

std::string Status::to_string() const {
    if (ok()) return "ok";
    return std::string(error_code_name(code_)) + ": " + message_;
}

Status Status::with_context(const std::string& context) const {
    if (ok()) return *this;
    return Status(code_, context + ": " + message_).with_field(field_);
}

} // namespace h3
