#include "cli_common.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "hmpmd/scheduler/policy.h"

namespace hmpmd {

Status WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Status::InvalidArgument(path + ": cannot write: " + std::strerror(errno));
  out << content;
  out.close();
  if (!out) return Status::Internal(path + ": write failed");
  return Status::Ok();
}

Status CheckWritable(const std::string& flag, const std::string& path,
                     const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const std::string& in : inputs) {
    if (fs::equivalent(path, in, ec)) {
      return Status::InvalidArgument(flag + ": '" + path + "' is the input file '" + in +
                                     "'; writing it would replace it");
    }
  }
  if (fs::is_directory(path, ec)) {
    return Status::InvalidArgument(flag + ": '" + path + "' is a directory; give a file name");
  }
  // A FIFO is only checked for permission: opening it would wait for a
  // reader (`--trace FIFO` hung here before the job ran), and a probe that
  // opened and closed it would end its reader's input. The write at the end
  // waits for a reader, as `echo > FIFO` does.
  if (fs::is_fifo(path, ec)) {
    if (::access(path.c_str(), W_OK) == 0) return Status::Ok();
    return Status::InvalidArgument(flag + ": cannot write '" + path + "': " + std::strerror(errno));
  }
  const bool existed = fs::exists(path, ec);
  {
    std::ofstream probe(path, std::ios::binary | std::ios::app);  // creates, never truncates
    if (!probe) {
      return Status::InvalidArgument(flag + ": cannot write '" + path +
                                     "': " + std::strerror(errno));
    }
  }
  if (!existed) fs::remove(path, ec);
  return Status::Ok();
}

namespace {

// Terminal columns of code point `cp`: two for East Asian wide and
// full-width characters and emoji, else one.
size_t ColumnsOf(uint32_t cp) {
  const bool wide = (cp >= 0x1100 && cp <= 0x115f) || (cp >= 0x2e80 && cp <= 0xa4cf) ||
                    (cp >= 0xac00 && cp <= 0xd7a3) || (cp >= 0xf900 && cp <= 0xfaff) ||
                    (cp >= 0xfe30 && cp <= 0xfe4f) || (cp >= 0xff00 && cp <= 0xff60) ||
                    (cp >= 0xffe0 && cp <= 0xffe6) || (cp >= 0x1f300 && cp <= 0x1faff) ||
                    (cp >= 0x20000 && cp <= 0x3fffd);
  return wide ? 2 : 1;
}

}  // namespace

std::string Column(std::string_view text, size_t width, bool cut) {
  const std::string line = OneLine(text);
  std::string out;
  size_t columns = 0;
  for (size_t i = 0; i < line.size();) {
    uint32_t cp = 0;
    const size_t len = DecodeUtf8(line, i, &cp);
    const size_t w = ColumnsOf(cp);
    if (cut && columns + w > width) break;
    out.append(line, i, len);
    columns += w;
    i += len;
  }
  if (columns < width) out.append(width - columns, ' ');
  return out;
}

Result<uint64_t> ParseWhole(const std::string& flag, std::string_view text, uint64_t min,
                            uint64_t max) {
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [next, ec] = std::from_chars(text.data(), end, value);
  const bool digits = !text.empty() && text.front() >= '0' && text.front() <= '9';
  if (!digits || ec != std::errc() || next != end || value < min || value > max) {
    return Status::InvalidArgument(flag + ": expected a whole number from " + std::to_string(min) +
                                   " to " + std::to_string(max) + ", got '" + OneLine(text) + "'");
  }
  return value;
}

CLI::Validator NonEmptyPath(const std::string& give) {
  return CLI::Validator(
      [give](std::string& value) {
        return value.empty() ? "an empty path; give " + give : std::string();
      },
      "PATH");
}

Status SetLogLevel(const std::string& level) {
  auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off") {
    return Status::InvalidArgument("--log-level: unknown level '" + level +
                                   "' (trace, debug, info, warn, error, off)");
  }
  spdlog::set_level(lvl);
  return Status::Ok();
}

std::string PolicyNamesText() {
  std::string out;
  for (const std::string& name : PolicyNames()) out += (out.empty() ? "" : ", ") + name;
  return out;
}

int Fail(const Status& st) {
  std::cerr << "hmpmd: " << OneLine(st.message()) << std::endl;
  switch (st.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kResourceExhausted:
      return kExitUsage;
    default:
      return kExitFailed;
  }
}

}  // namespace hmpmd
