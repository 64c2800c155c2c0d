#include "serve/web/web_assets.h"

#include <string>

namespace h3::serve {

namespace {

std::string_view content_type_of(std::string_view name) {
    const auto ends = [&](std::string_view ext) {
        return name.size() >= ext.size() && name.substr(name.size() - ext.size()) == ext;
    };
    if (ends(".html")) return "text/html; charset=utf-8";
    if (ends(".css")) return "text/css; charset=utf-8";
    if (ends(".js")) return "text/javascript; charset=utf-8";
    if (ends(".svg")) return "image/svg+xml";
    if (ends(".png")) return "image/png";
    return "application/octet-stream";
}

struct Table {
    std::vector<std::pair<std::string, WebAsset>> assets;
    Table() {
        for (size_t i = 0; i < kWebFileCount; ++i) {
            const WebFile& f = kWebFiles[i];
            assets.push_back(
                {f.name,
                 {std::string_view(reinterpret_cast<const char*>(f.data), f.size), content_type_of(f.name)}});
        }
    }
};

const Table& table() {
    static const Table t;
    return t;
}

} // namespace

const WebAsset* find_web_asset(std::string_view path) {
    std::string_view name;
    if (path == "/" || path == "/index.html")
        name = "index.html";
    else if (path.rfind("/web/", 0) == 0)
        name = path.substr(5);
    else
        return nullptr;
    for (const auto& [n, a] : table().assets)
        if (n == name) return &a;
    return nullptr;
}

bool is_web_asset_path(std::string_view path) {
    return find_web_asset(path) != nullptr;
}

std::vector<std::pair<std::string_view, std::string_view>> web_asset_headers() {
    return {{"Content-Security-Policy",
             "default-src 'self'; media-src 'self' blob:; img-src 'self' blob: data:; object-src 'none'; "
             "base-uri 'none'; frame-ancestors 'none'"},
            {"X-Content-Type-Options", "nosniff"},
            {"Cache-Control", "no-cache"}};
}

} // namespace h3::serve
