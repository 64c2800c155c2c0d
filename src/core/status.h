// Recoverable errors: Status / Result<T> (public: include/h3/status.h). Programming errors use H3_CHECK
// (check.h).
#pragma once

#include <h3/status.h>
