#include "cli_common.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

namespace hmpmd {

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::Internal(path + ": read failed");
  return ss.str();
}

Status WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Status::InvalidArgument(path + ": cannot write: " + std::strerror(errno));
  out << content;
  out.close();
  if (!out) return Status::Internal(path + ": write failed");
  return Status::Ok();
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
  std::cerr << "hmpmd: " << st.message() << std::endl;
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
