// Rendering of a CompareReport: the JSON document of `compare --json` and the human-readable summary.
//
// JSON: {"kind", "a", "b", "video", "audio", "latents", "warnings"}; a section that does not apply is null.
// Non-finite numbers: +inf is the string "inf" (identical frames' PSNR, identical signals' SNR), −inf the
// string "-inf", NaN (an undefined cosine or RMS ratio of all-zero signals) null. Everything else is a
// number.
#pragma once

#include "pipeline/compare.h"

#include <nlohmann/json.hpp>

#include <string>

namespace h3::pipeline {

nlohmann::ordered_json compare_report_json(const CompareReport& report);
std::string compare_report_text(const CompareReport& report);

// The conventions above for one value, for other reports of the same metrics (bench quality): the JSON
// number ("inf" / "-inf" / null for NaN), and "%.*f" with "inf" / "-inf" / "nan" spelled out.
nlohmann::ordered_json report_number(double x);
std::string report_fixed(double x, int digits);

} // namespace h3::pipeline
