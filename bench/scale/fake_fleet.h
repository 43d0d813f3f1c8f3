// FakeFleet: one process standing in for many workers, so that the
// controller can be measured with thousands of them on one machine. Each
// fake worker is a real DEALER socket speaking the real protocol: it
// registers with its cores, sends heartbeats at the period the controller
// asks, and answers every task it is sent, at once or after a modelled
// duration per task on the lane it was sent to. Nothing else (no data
// plane, no kernels): what is measured is the controller.
//
// It is driven over stdin/stdout by the benchmark that started it, one
// line each way (FleetProcess):
//   (it prints)  "registered SECONDS"   once every worker has its ack
//   "silence K"  -> "ok"                worker K closes its socket and goes quiet
//   "stats"      -> "heartbeats H results R"
//   end of stdin                        the fleet exits
#pragma once

#include <cstdint>
#include <string>

namespace hmpmd::bench {

struct FakeFleetOptions {
  std::string controller;  // the controller's ROUTER endpoint
  uint32_t workers = 100;
  uint32_t cube_cores = 1;   // per worker
  double task_us = 0;        // modelled duration of each task on its lane
  double max_seconds = 900;  // the fleet exits after this long whatever happens
};

// Runs the fleet until stdin closes or max_seconds pass; returns the exit code.
int RunFakeFleet(const FakeFleetOptions& options);

}  // namespace hmpmd::bench
