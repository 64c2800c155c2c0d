// The web page `h3-engine serve` answers at / (src/serve/web/: index.html, app.css, app.js), compiled into
// the binary by cmake/embed_files.cmake: nothing is read from disk or fetched at run time. Listener-agnostic:
// the HTTP layer asks find_web_asset(path) and sends what it returns with web_asset_headers().
#pragma once

#include <cstddef>
#include <string_view>
#include <utility>
#include <vector>

namespace h3::serve {

struct WebFile { // one embedded file (generated table)
    const char* name;
    const unsigned char* data;
    size_t size;
};
extern const WebFile kWebFiles[];
extern const size_t kWebFileCount;

struct WebAsset {
    std::string_view body;
    std::string_view content_type;
};

// "/" → index.html, "/web/NAME" → NAME; nullptr for anything else.
const WebAsset* find_web_asset(std::string_view path);
// True for the paths find_web_asset answers (they need no API key: static files without data).
bool is_web_asset_path(std::string_view path);
// Content-Security-Policy (self only; blob: media for the player), nosniff, no caching of the page.
std::vector<std::pair<std::string_view, std::string_view>> web_asset_headers();

} // namespace h3::serve
