#include "cli_common.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

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

Status WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Status::InvalidArgument(path + ": cannot write: " + std::strerror(errno));
  out << content;
  out.close();
  if (!out) return Status::Internal(path + ": write failed");
  return Status::Ok();
}

Status CheckWritable(const std::string& flag, const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    return Status::InvalidArgument(flag + ": '" + path + "' is a directory; give a file name");
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

std::string OneLine(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out;
}

Result<std::string> ReadToken(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  size_t end = text.find_first_of("\r\n");
  std::string token = text.substr(0, end);
  while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) token.pop_back();
  if (token.empty()) return Status::InvalidArgument(path + ": the token file is empty");
  return token;
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
