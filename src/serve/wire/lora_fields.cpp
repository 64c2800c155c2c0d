#include "serve/wire/lora_fields.h"

#include "io/json_file.h"

#include <cmath>

namespace h3::api {

namespace {

Status lora_field_error(const std::string& field, const std::string& message, std::string* bad_field) {
    if (bad_field) *bad_field = field;
    return invalid_argument(field + ": " + message);
}

} // namespace

Status read_lora_fields(const nlohmann::json& body, pipeline::LoraJobInput& in, std::string* bad_field) {
    if (auto it = body.find("lora_strict"); it != body.end() && !it->is_null()) {
        if (it->is_boolean()) {
            in.lora_strict = it->get<bool>();
        } else if (it->is_string() && (*it == "true" || *it == "false")) {
            in.lora_strict = *it == "true";
        } else {
            return lora_field_error("lora_strict", "must be true or false, got " + it->dump(), bad_field);
        }
    }
    auto it = body.find("lora");
    if (it == body.end() || it->is_null()) return ok_status();
    nlohmann::json list = *it;
    if (list.is_string()) { // a multipart form part carries the list as JSON text
        // bounded nesting like every parse of outside JSON (a deep list would recurse in copies and dumps)
        auto parsed = io::parse_json(it->get_ref<const std::string&>(), "the form part");
        if (!parsed.ok()) return lora_field_error("lora", parsed.status().message(), bad_field);
        list = std::move(parsed).value();
    }
    if (list.is_object()) list = nlohmann::json::array({list});
    if (!list.is_array())
        return lora_field_error(
            "lora", std::string("must be a list of {\"path\": NAME, \"scale\": S}, got ") + list.type_name(),
            bad_field);
    for (size_t i = 0; i < list.size(); ++i) {
        const nlohmann::json& e = list[i];
        const std::string which = "entry " + std::to_string(i);
        if (!e.is_object()) return lora_field_error("lora", which + " must be an object", bad_field);
        for (auto f = e.begin(); f != e.end(); ++f)
            if (f.key() != "path" && f.key() != "scale")
                return lora_field_error(
                    "lora", which + ": unknown key '" + f.key() + "' (accepted: path, scale)", bad_field);
        auto p = e.find("path");
        if (p == e.end() || !p->is_string() || p->get<std::string>().empty())
            return lora_field_error("lora", which + ": path must be a non-empty string", bad_field);
        pipeline::LoraInput l{.path = p->get<std::string>()};
        if (auto s = e.find("scale"); s != e.end() && !s->is_null()) {
            if (!s->is_number() || !std::isfinite(s->get<double>()))
                return lora_field_error("lora", which + ": scale must be a finite number, got " + s->dump(),
                                        bad_field);
            l.scale = s->get<double>();
        }
        in.lora.push_back(std::move(l));
    }
    return ok_status();
}

nlohmann::json lora_record(const pipeline::JobAdapters& adapters) {
    nlohmann::json j = nlohmann::json::array();
    for (const runtime::AdapterUse& u : adapters.uses) j.push_back({{"path", u.name}, {"scale", u.strength}});
    return j;
}

} // namespace h3::api
