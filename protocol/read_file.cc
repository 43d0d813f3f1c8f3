#include "hmpmd/protocol/read_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace hmpmd {

Result<std::string> ReadFile(const std::string& path, size_t max_bytes) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return Status::InvalidArgument(path + ": is a directory, not a file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": cannot open: " + std::strerror(errno));
  // Read in chunks up to the limit: /dev/zero or a huge file must not
  // exhaust memory.
  std::string out;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    out.append(buf, static_cast<size_t>(in.gcount()));
    if (out.size() > max_bytes) {
      return Status::ResourceExhausted(path + ": larger than the limit of " +
                                       std::to_string(max_bytes) + " bytes");
    }
  }
  if (in.bad()) return Status::Internal(path + ": read failed: " + std::strerror(errno));
  return out;
}

}  // namespace hmpmd
