// rl_driver: the async RL example's driver in C++ (the same loop as
// rl_driver.py). Connects to a controller whose pool runs rl_worker
// processes, runs the synchronous baseline and/or the asynchronous mode
// (rl_loop.h) `--runs` times each, and prints learner steps/s and pool
// utilisation per run, their medians and the async/sync ratio.
//
//   rl_driver --controller tcp://127.0.0.1:5555 --devices 4 [--mode both|sync|async]
//             [--runs 3] [--steps 30] [--batch 16] [--broadcast-every 1]
//             [--max-staleness 2] [--inflight 0] [--median-us 4000] [--sigma 0.8]
//             [--max-us 40000] [--train-us 20000] [--load-us 500] [--reward-us 200]
//             [--params 4096] [--seed 1] [--sleep] [--record FILE]
//
// examples/rl/run_rl.py starts the controller and the workers for you.
// Exit codes: 0 success, 1 a run failed, 2 bad flags.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "hmpmd/client/client.h"
#include "rl_loop.h"

namespace {

struct Flags {
  std::string controller = "tcp://127.0.0.1:5555";
  std::string mode = "both";
  std::string record;
  int runs = 1;
  rl::RlOptions rl;
};

bool ParseInt(const std::string& text, int64_t lo, int64_t hi, int64_t* out) {
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

// Parses argv into `f`; on error prints one line and returns false.
bool ParseFlags(int argc, char** argv, Flags* f) {
  std::map<std::string, std::pair<int64_t*, std::pair<int64_t, int64_t>>> ints;
  int64_t devices = f->rl.devices, steps = f->rl.steps, batch = f->rl.batch,
          every = f->rl.broadcast_every, staleness = f->rl.max_staleness, inflight = f->rl.inflight,
          runs = f->runs;
  ints["--devices"] = {&devices, {2, 4096}};
  ints["--steps"] = {&steps, {1, 1'000'000}};
  ints["--batch"] = {&batch, {1, 100'000}};
  ints["--broadcast-every"] = {&every, {1, 1'000'000}};
  ints["--max-staleness"] = {&staleness, {0, 1'000'000}};
  ints["--inflight"] = {&inflight, {0, 1'000'000}};
  ints["--runs"] = {&runs, {1, 100}};
  ints["--median-us"] = {&f->rl.median_us, {0, 60'000'000}};
  ints["--max-us"] = {&f->rl.max_us, {0, 600'000'000}};
  ints["--train-us"] = {&f->rl.train_us, {0, 600'000'000}};
  ints["--load-us"] = {&f->rl.load_us, {0, 10'000'000}};
  ints["--reward-us"] = {&f->rl.reward_us, {0, 10'000'000}};
  ints["--params"] = {&f->rl.params, {1, int64_t{1} << 24}};
  ints["--seed"] = {&f->rl.seed, {0, INT64_MAX}};
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--sleep") {
      f->rl.spin = false;
      continue;
    }
    if (flag == "--help" || flag == "-h") {
      std::printf(
          "usage: rl_driver [--controller tcp://HOST:PORT] [--mode both|sync|async] [--runs N]\n"
          "  [--devices N] [--steps N] [--batch N] [--broadcast-every K] [--max-staleness S]\n"
          "  [--inflight N] [--median-us US] [--sigma X] [--max-us US] [--train-us US]\n"
          "  [--load-us US] [--reward-us US] [--params N] [--seed N] [--sleep] [--record FILE]\n");
      std::exit(0);
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "rl_driver: %s needs a value\n", flag.c_str());
      return false;
    }
    const std::string value = argv[++i];
    if (auto it = ints.find(flag); it != ints.end()) {
      const auto [lo, hi] = it->second.second;
      if (!ParseInt(value, lo, hi, it->second.first)) {
        std::fprintf(stderr, "rl_driver: %s: '%s' is not an integer in [%lld, %lld]\n",
                     flag.c_str(), value.c_str(), static_cast<long long>(lo),
                     static_cast<long long>(hi));
        return false;
      }
    } else if (flag == "--sigma") {
      char* end = nullptr;
      f->rl.sigma = std::strtod(value.c_str(), &end);
      if (*end != '\0' || !(f->rl.sigma >= 0 && f->rl.sigma <= 4)) {
        std::fprintf(stderr, "rl_driver: --sigma: '%s' is not a number in [0, 4]\n", value.c_str());
        return false;
      }
    } else if (flag == "--controller") {
      f->controller = value;
    } else if (flag == "--mode") {
      if (value != "both" && value != "sync" && value != "async") {
        std::fprintf(stderr, "rl_driver: --mode: '%s' is not both, sync or async\n", value.c_str());
        return false;
      }
      f->mode = value;
    } else if (flag == "--record") {
      f->record = value;
    } else {
      std::fprintf(stderr, "rl_driver: unknown flag '%s' (see --help)\n", flag.c_str());
      return false;
    }
  }
  f->rl.devices = static_cast<uint32_t>(devices);
  f->rl.steps = static_cast<uint32_t>(steps);
  f->rl.batch = static_cast<uint32_t>(batch);
  f->rl.broadcast_every = static_cast<uint32_t>(every);
  f->rl.max_staleness = static_cast<uint32_t>(staleness);
  f->rl.inflight = static_cast<uint32_t>(inflight);
  f->runs = static_cast<int>(runs);
  return true;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : (n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2);
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  if (!ParseFlags(argc, argv, &f)) return 2;
  std::FILE* record = nullptr;
  if (!f.record.empty()) {
    record = std::fopen(f.record.c_str(), "w");
    if (record == nullptr) {
      std::fprintf(stderr, "rl_driver: --record: cannot write '%s'\n", f.record.c_str());
      return 2;
    }
  }
  std::vector<std::string> modes;
  if (f.mode != "async") modes.push_back("sync");
  if (f.mode != "sync") modes.push_back("async");
  std::printf(
      "rl: %u devices, %u learner steps of %u rollouts, rollouts lognormal(median %lld us, "
      "sigma %.2f), train %lld us, broadcast every %u, max staleness %u, %s\n",
      f.rl.devices, f.rl.steps, f.rl.batch, static_cast<long long>(f.rl.median_us), f.rl.sigma,
      static_cast<long long>(f.rl.train_us), f.rl.broadcast_every, f.rl.max_staleness,
      f.rl.spin ? "spin" : "sleep");
  std::map<std::string, std::vector<double>> rate, util;
  for (int run = 0; run < f.runs; ++run) {
    for (const std::string& mode : modes) {
      hmpmd::client::ClientOptions o;
      o.controller = f.controller;
      o.session = "rl-" + mode + "-" + std::to_string(run);
      hmpmd::Result<std::unique_ptr<hmpmd::client::Client>> client =
          hmpmd::client::Client::Connect(o);
      if (!client.ok()) {
        std::fprintf(stderr, "rl_driver: %s\n", client.status().ToString().c_str());
        return 1;
      }
      hmpmd::Result<rl::RunStats> r = rl::RunMode(**client, mode, f.rl, run, record);
      if (!r.ok()) {
        std::fprintf(stderr, "rl_driver: %s run %d: %s\n", mode.c_str(), run,
                     r.status().ToString().c_str());
        return 1;
      }
      hmpmd::Status closed = (*client)->Close();
      // Cancelled rollouts fail the session's job by design; nothing else may.
      if (!closed.ok() && r->cancelled == 0) {
        std::fprintf(stderr, "rl_driver: %s run %d: %s\n", mode.c_str(), run,
                     closed.ToString().c_str());
        return 1;
      }
      std::printf(
          "%-5s run %d: %3u steps in %6.3f s = %6.2f steps/s, utilisation %5.1f%%, "
          "rollouts %llu (discarded %llu, cancelled %llu), max lag %lld\n",
          mode.c_str(), run + 1, r->steps, r->wall_s, r->steps_per_s(), 100 * r->utilisation(),
          static_cast<unsigned long long>(r->rollouts),
          static_cast<unsigned long long>(r->discarded),
          static_cast<unsigned long long>(r->cancelled), static_cast<long long>(r->max_lag));
      std::fflush(stdout);
      rate[mode].push_back(r->steps_per_s());
      util[mode].push_back(r->utilisation());
    }
  }
  if (record != nullptr) std::fclose(record);
  std::printf("median of %d run(s):\n", f.runs);
  for (const std::string& mode : modes) {
    const auto [lo, hi] = std::minmax_element(rate[mode].begin(), rate[mode].end());
    std::printf("  %-5s %6.2f steps/s [%.2f .. %.2f], utilisation %5.1f%%\n", mode.c_str(),
                Median(rate[mode]), *lo, *hi, 100 * Median(util[mode]));
  }
  if (modes.size() == 2 && Median(rate["sync"]) > 0) {
    std::printf("  async / sync steps/s = %.2fx (target >= 1.3x)\n",
                Median(rate["async"]) / Median(rate["sync"]));
  }
  return 0;
}
