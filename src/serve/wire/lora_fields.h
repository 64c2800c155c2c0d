// The wire's LoRA fields (POST /v1/videos): `lora` — a list of {"path": NAME, "scale": S} (NAME inside the
// server's --lora-dir, scale default 1) — and `lora_strict` (unknown adapter keys are an error). In a
// multipart form `lora` is one part holding that JSON list and `lora_strict` "true" or "false". The builder
// resolves the names (pipeline/job_lora.h); errors here are about the JSON shape and name the field.
#pragma once

#include "core/status.h"
#include "pipeline/job_lora.h"

#include <nlohmann/json.hpp>

#include <string>

namespace h3::api {

// Reads `lora` and `lora_strict` from the body (absent or null: none).
Status read_lora_fields(const nlohmann::json& body, pipeline::LoraJobInput& in, std::string* bad_field);
// The record's form: [{"path": ..., "scale": ...}, ...].
nlohmann::json lora_record(const pipeline::JobAdapters& adapters);

} // namespace h3::api
