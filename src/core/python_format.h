// Python's fixed-point float formatting ("{:.Nf}".format(x), f"{x:.Nf}"), reproduced without the C library:
// the double's exact decimal expansion rounded half to even at N fraction digits. The ref2va conditioner
// labels video blocks with f"<{t:.1f} seconds>", so 0.25 → "0.2", 0.75 → "0.8", 1.25 → "1.2" (exact ties go
// to the even digit) while 0.35 → "0.3" (the double is 0.34999…). Sign kept for negative zero ("-0.0"),
// "nan", "inf", "-inf" as Python prints them.
#pragma once

#include <string>

namespace h3 {

// digits in [0, 100] (H3_CHECK).
std::string python_format_fixed(double value, int digits);

} // namespace h3
