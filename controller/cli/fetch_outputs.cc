#include "fetch_outputs.h"

#include <filesystem>
#include <fstream>

#include "hmpmd/client/fetch.h"

namespace hmpmd {

Status FetchOutputsTo(const nlohmann::json& outputs, JobId job, const std::string& dir,
                      double timeout_s) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::InvalidArgument("--fetch: cannot create '" + dir + "': " + ec.message());
  nlohmann::json manifest = nlohmann::json::array();
  for (const auto& o : outputs.value("outputs", nlohmann::json::array())) {
    const std::string task = o.value("task", "");
    const std::string endpoint = o.value("endpoint", "");
    const uint32_t run = o.value("run", 0u);
    if (task.empty() || task.find('/') != std::string::npos || endpoint.empty()) {
      return Status::Corruption("--fetch: malformed output entry " + o.dump());
    }
    auto buffers = client::FetchOutputs(endpoint, job, run, static_cast<int64_t>(timeout_s * 1000));
    if (!buffers.ok())
      return Status(buffers.status().code(),
                    "--fetch: task '" + task + "': " + buffers.status().message());
    for (size_t i = 0; i < buffers->size(); ++i) {
      const Buffer& b = (*buffers)[i];
      const std::string name = task + "." + std::to_string(i) + ".bin";
      std::ofstream out(std::filesystem::path(dir) / name, std::ios::binary);
      out.write(reinterpret_cast<const char*>(b.data.data()),
                static_cast<std::streamsize>(b.data.size()));
      if (!out) return Status::Internal("--fetch: cannot write '" + dir + "/" + name + "'");
      manifest.push_back({{"task", task},
                          {"index", i},
                          {"file", name},
                          {"dtype", b.dtype},
                          {"shape", b.shape},
                          {"bytes", b.data.size()}});
    }
  }
  std::ofstream m(std::filesystem::path(dir) / "manifest.json");
  m << manifest.dump(2) << "\n";
  if (!m) return Status::Internal("--fetch: cannot write '" + dir + "/manifest.json'");
  return Status::Ok();
}

}  // namespace hmpmd
