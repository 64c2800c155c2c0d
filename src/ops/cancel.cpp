#include "ops/cancel.h"

#include <string>

namespace h3::ops {

namespace {
thread_local const std::atomic<bool>* t_flag = nullptr;
} // namespace

CancelScope::CancelScope(const std::atomic<bool>* flag) : previous_(t_flag) {
    if (flag) t_flag = flag;
}

CancelScope::~CancelScope() {
    t_flag = previous_;
}

const std::atomic<bool>* cancel_flag() {
    return t_flag;
}

Status cancelled_in(const char* op) {
    return cancelled(std::string(op) + ": cancelled");
}

} // namespace h3::ops
