// The README's Driver API example as a program: x = scale(4 floats, 2),
// y = add(x, x), printed; exits 1 with the error if a step fails.
// Usage: driver [CONTROLLER] [CONNECT_TIMEOUT_MS]; --help or -h prints it.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "hmpmd/client/client.h"

int main(int argc, char** argv) {
  using namespace hmpmd::client;
  // Asked anywhere, as embedded_worker does: "--help" was taken for the
  // controller's endpoint.
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::puts(
          "usage: driver [CONTROLLER] [CONNECT_TIMEOUT_MS]\n"
          "Runs scale then add on the controller at CONTROLLER (default tcp://127.0.0.1:5555)\n"
          "and prints the result.");
      return 0;
    }
  }
  ClientOptions o;
  if (argc > 1) o.controller = argv[1];
  if (argc > 2) o.connect_timeout_ms = std::atoll(argv[2]);
  o.session = "driver-example";
  auto client = Client::Connect(o);
  if (!client.ok()) {
    std::fprintf(stderr, "driver: %s\n", client.status().ToString().c_str());
    return 1;
  }
  Future x =
      (*client)->Submit({.kernel = "scale", .args = {{"n", int64_t{4}}, {"factor", 2.0}}}).value();
  Future y = (*client)->Submit({.kernel = "add", .inputs = {x, x}}).value();
  auto out = y.Get(10000);  // one f32 buffer, 4 elements, fetched from y's worker
  if (!out.ok() || out->size() != 1) {
    std::fprintf(stderr, "driver: %s\n", out.status().ToString().c_str());
    return 1;
  }
  std::vector<float> v((*out)[0].data.size() / sizeof(float));
  if (!v.empty()) std::memcpy(v.data(), (*out)[0].data.data(), v.size() * sizeof(float));
  for (float f : v) std::printf("%g ", f);
  std::printf("\n");
  hmpmd::Status done = (*client)->Close();  // OK when every task succeeded
  if (!done.ok()) std::fprintf(stderr, "driver: %s\n", done.ToString().c_str());
  return done.ok() ? 0 : 1;
}
