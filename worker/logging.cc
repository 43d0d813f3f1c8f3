#include "logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace hmpmd::worker {
namespace {

spdlog::level::level_enum ToSpdlog(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace:
      return spdlog::level::trace;
    case LogLevel::kDebug:
      return spdlog::level::debug;
    case LogLevel::kInfo:
      return spdlog::level::info;
    case LogLevel::kWarn:
      return spdlog::level::warn;
    case LogLevel::kError:
      return spdlog::level::err;
    case LogLevel::kOff:
      return spdlog::level::off;
  }
  return spdlog::level::info;
}

}  // namespace

std::shared_ptr<spdlog::logger> MakeLogger(LogLevel level) {
  // One sink for all Workers of the process, so their lines never interleave.
  static const auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>("worker", sink);
  logger->set_level(ToSpdlog(level));
  logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%n] [%^%l%$] %v");
  return logger;
}

}  // namespace hmpmd::worker
