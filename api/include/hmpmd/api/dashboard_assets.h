// The dashboard's files and the OpenAPI document, compiled into the binary
// at build time (api/dashboard/embed_assets.cmake writes the table),
// so the controller serves them offline with nothing installed beside it.
// Thread-safety: immutable data; call from any thread.
#pragma once

#include <cstddef>
#include <string_view>

namespace hmpmd {

struct EmbeddedAsset {
  const char* path;          // URL path, e.g. "/index.html"
  const char* content_type;  // e.g. "text/html; charset=utf-8"
  const unsigned char* data;
  size_t size;
};

// The asset served at `path`, or nullptr.
const EmbeddedAsset* FindDashboardAsset(std::string_view path);

}  // namespace hmpmd
