// embedded_worker: a program that embeds the HyperMPMD worker and adds its
// own kernel, `relu` (max(x, 0) element-wise on a float32 input, or on
// `n` generated values in [-1, 1) without one).
//
// It takes the flags `hmpmd run` and LocalCluster pass to a worker
// (--controller, --cores cube=1,vector=2, --name, --log-level), so
//   hmpmd run job.json --worker-binary ./embedded_worker
// runs a job on it.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "hmpmd/worker/worker.h"

namespace {

using hmpmd::Buffer;
using hmpmd::worker::KernelArgs;

std::vector<Buffer> Relu(const KernelArgs& args, std::span<const Buffer> inputs) {
  std::vector<float> v;
  std::vector<int64_t> shape;
  if (!inputs.empty()) {
    if (inputs[0].dtype != "f32") throw std::invalid_argument("relu: inputs[0] must be f32");
    v.resize(inputs[0].data.size() / sizeof(float));
    std::memcpy(v.data(), inputs[0].data.data(), v.size() * sizeof(float));
    shape = inputs[0].shape;
  } else {
    const int64_t n = args.Int("n", 1024);
    if (n < 0 || n > (int64_t{1} << 26)) throw std::invalid_argument("relu: 'n' out of range");
    v.resize(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 200) / 100.0f - 1.0f;
    shape = {n};
  }
  for (float& x : v) x = std::max(x, 0.0f);
  Buffer out;
  out.shape = std::move(shape);
  out.data.resize(v.size() * sizeof(float));
  std::memcpy(out.data.data(), v.data(), out.data.size());
  return {std::move(out)};
}

// "cube=1,vector=2" (a kind left out has no cores) into the options, as
// hmpmd-worker reads it.
hmpmd::Status ParseCores(const std::string& text, hmpmd::worker::WorkerOptions* o) {
  hmpmd::Result<hmpmd::CoreCounts> counts = hmpmd::ParseCoreCounts(text);
  if (!counts.ok()) return counts.status();
  o->cube_cores = counts->count[static_cast<size_t>(hmpmd::CoreKind::kCube)];
  o->vector_cores = counts->count[static_cast<size_t>(hmpmd::CoreKind::kVector)];
  return hmpmd::Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  hmpmd::worker::WorkerOptions options;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::puts(
          "usage: embedded_worker --controller tcp://HOST:PORT [--cores cube=C,vector=V]\n"
          "                       [--name NAME] [--log-level debug|info|warn]\n"
          "A worker with the built-in kernels and 'relu'.");
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "embedded_worker: %s needs a value\n", flag.c_str());
      return 2;
    }
    const std::string value = argv[i + 1];
    if (flag == "--controller") {
      options.controller_endpoint = value;
    } else if (flag == "--cores") {
      if (hmpmd::Status st = ParseCores(value, &options); !st.ok()) {
        std::fprintf(stderr, "embedded_worker: --cores: %s\n", st.message().c_str());
        return 2;
      }
    } else if (flag == "--name") {
      options.name = value;
    } else if (flag == "--log-level") {
      options.log_level = value == "debug"  ? hmpmd::worker::LogLevel::kDebug
                          : value == "warn" ? hmpmd::worker::LogLevel::kWarn
                                            : hmpmd::worker::LogLevel::kInfo;
    } else {
      std::fprintf(stderr, "embedded_worker: unknown flag '%s'\n", flag.c_str());
      return 2;
    }
  }
  hmpmd::worker::Worker worker(options);
  worker.RegisterKernel("relu", Relu);
  hmpmd::Status status = worker.Run();
  if (!status.ok()) {
    std::fprintf(stderr, "embedded_worker: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
