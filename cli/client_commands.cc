// `hmpmd submit | status | cancel | forget | pool`: clients of the controller's REST
// API at --url (default $HMPMD_URL, else http://127.0.0.1:8080).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "cli_common.h"
#include "fetch_outputs.h"
#include "hmpmd/controller/job_report.h"
#include "hmpmd/http/http_client.h"
#include "hmpmd/protocol/json_text.h"
#include "rest_client.h"

namespace hmpmd {
namespace {

using json = nlohmann::json;
using std::chrono::milliseconds;

std::string Pct(const json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_number()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", j[key].get<double>() * 100);
  return buf;
}

std::string Ms(const json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_number()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f ms", j[key].get<double>() * 1e3);
  return buf;
}

void PrintJob(const json& j) {
  std::cout << "job " << j.value("id", uint64_t{0}) << " '" << j.value("name", "")
            << "': " << j.value("state", "?");
  if (j.contains("error")) std::cout << " (" << OneLine(j["error"].get<std::string>()) << ")";
  if (j.contains("tenant") && j["tenant"].is_string()) {
    std::cout << "\n  tenant       " << j["tenant"].get<std::string>();
  }
  if (j.contains("waiting") && j["waiting"].is_string()) {
    std::cout << "\n  waiting      " << j["waiting"].get<std::string>();
  }
  if (j.contains("short_sets") && j["short_sets"].is_array()) {
    std::cout << "\n  short sets   " << ShortSetsText(j["short_sets"]);
  }
  std::cout << "\n  tasks        " << j.value("done", uint64_t{0}) << " of "
            << j.value("tasks", uint64_t{0}) << " done, " << j.value("running", uint64_t{0})
            << " running";
  // Dispatched behind another task on a worker's lane.
  if (const uint64_t queued = j.value("queued", uint64_t{0}); queued > 0) {
    std::cout << ", " << queued << " queued on workers";
  }
  std::cout << "\n";
  // Wall-clock times (RFC 3339, UTC) beside the monotonic durations.
  for (const char* key : {"submitted", "started", "finished"}) {
    const std::string at = std::string(key) + "_at";
    if (!j.contains(at) || !j[at].is_string()) continue;
    std::printf("  %-12s %s", key, j[at].get<std::string>().c_str());
    const std::string us = std::string(key) + "_us";
    if (std::string(key) == "finished" && j.contains("started_us") && j["started_us"].is_number() &&
        j.contains(us) && j[us].is_number()) {
      std::printf(" (%.3f s after its start)",
                  (j[us].get<int64_t>() - j["started_us"].get<int64_t>()) / 1e6);
    }
    std::printf("\n");
  }
  std::fflush(stdout);
  if (j.contains("history_missing") && j["history_missing"].is_string()) {
    std::cout << "  history      " << j["history_missing"].get<std::string>() << "\n";
  }
  if (j.contains("makespan_s") && j["makespan_s"].is_number()) {
    std::cout << "  makespan     " << Ms(j, "makespan_s") << " (lower bound "
              << Ms(j, "lower_bound_s") << ")\n"
              << "  utilisation  " << Pct(j, "utilisation") << ", bubble ratio "
              << Pct(j, "bubble_ratio") << ", comm masking " << Pct(j, "masking_ratio") << "\n";
  }
  // As `hmpmd run` prints it (TextSummary).
  if (j.contains("state_loads") && j["state_loads"].is_number()) {
    std::printf("  state loads  %llu, %.3f MB in %.3f ms, %.1f%% hidden under the tasks ahead\n",
                static_cast<unsigned long long>(j["state_loads"].get<uint64_t>()),
                j.value("state_load_bytes", 0.0) / 1e6, j.value("state_load_s", 0.0) * 1e3,
                j.value("state_load_hidden_fraction", 0.0) * 100);
  }
}

// A job id: decimal digits that fit in 64 bits, as the REST API spells it
// (without leading zeros: "007" is job 7).
Result<std::string> CanonicalJobId(const std::string& job) {
  const size_t first = job.find_first_not_of('0');
  const std::string id = first != std::string::npos ? job.substr(first) : job.empty() ? "" : "0";
  const bool digits =
      !id.empty() && id.size() <= 20 && id.find_first_not_of("0123456789") == std::string::npos;
  if (!digits || (id.size() == 20 && id > "18446744073709551615")) {
    return Status::InvalidArgument("JOB: expected a job id (a number), got '" + job + "'");
  }
  return id;
}

bool Terminal(const std::string& state) {
  return state == "succeeded" || state == "failed" || state == "cancelled";
}

constexpr milliseconds kPollPeriod{100};
// How long a job waits for workers before `submit --wait` says why.
constexpr milliseconds kWaitingNotice{3000};

// Why `st` (an HttpCall failure) failed, without the URL it names first.
std::string TransportReason(const Client& c, const Status& st) {
  std::string reason = st.message();
  for (const std::string& prefix :
       {"cannot reach " + c.names() + ": ", "cannot reach " + c.url().ToString() + ": ",
        c.url().ToString() + ": "}) {
    if (reason.starts_with(prefix)) return reason.substr(prefix.size());
  }
  return reason;
}

// When `submit --wait` stops waiting (--wait-timeout is in double seconds).
using Deadline = std::chrono::time_point<std::chrono::steady_clock, std::chrono::duration<double>>;

// GETs job `id`'s summary (or its `route`, e.g. "/outputs") for `submit
// --wait`. A controller that cannot be
// reached or answers 5xx (restarting after a crash, recovering its jobs) is
// waited for until `deadline`: one line on stderr when it goes away and one
// when it is back, however many polls fail in between. Any other error
// answer (404: the job is gone) is returned at once. An answer from a
// controller on another job store than `store` (when given) is an error:
// restarted on a fresh one, it has another job under the same id.
Result<json> PollJob(const Client& c, uint64_t id, Deadline deadline, const std::string& store,
                     const std::string& route = "") {
  using Clock = std::chrono::steady_clock;
  const std::string target = "/api/v1/jobs/" + std::to_string(id) + route;
  auto seconds_since = [](Clock::time_point t) {
    return std::to_string(std::lround(std::chrono::duration<double>(Clock::now() - t).count()));
  };
  std::optional<Clock::time_point> down_since;
  std::string outage;  // "controller unreachable at URL: why"
  while (true) {
    // A poll never runs past the deadline by more than a connect attempt.
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    auto r = Send(c, "GET", target, "", std::min(c.timeout, std::max(left, milliseconds(100))));
    const std::string url = c.url().ToString();
    if (!r.ok()) {
      outage = "controller unreachable at " + c.names() + ": " + TransportReason(c, r.status());
    } else if (r->status >= 500) {
      outage = "controller at " + url + " answered HTTP " + std::to_string(r->status) + ": " +
               FromAnswer(c, "GET", target, *r).status().message();
    } else if (const std::string now = StoreOf(*r);
               !store.empty() && !now.empty() && now != store) {
      return Status::Unavailable("job " + std::to_string(id) + ": gone: the controller at " + url +
                                 " restarted on another job store (not its --db of before), "
                                 "where job " +
                                 std::to_string(id) + " is another job");
    } else {
      if (down_since) {
        std::cerr << "hmpmd: controller back at " << url << " after " << seconds_since(*down_since)
                  << " s; still waiting for job " << id << std::endl;
      }
      return FromAnswer(c, "GET", target, *r);
    }
    if (!down_since) {
      down_since = Clock::now();
      std::cerr << "hmpmd: " << OneLine(outage) << "; retrying" << std::endl;
    }
    if (Clock::now() >= deadline) {
      return Status::Unavailable("job " + std::to_string(id) + ": " + outage + ", for " +
                                 seconds_since(*down_since) + " s; gave up after --wait-timeout");
    }
    std::this_thread::sleep_for(kPollPeriod);
  }
}

// Extra seconds a submit waits for its answer per MiB of spec.
constexpr double kSubmitSecondsPerMiB = 5.0;

int Submit(const ClientArgs& a, const std::string& file, bool wait, double wait_timeout_s,
           const std::string& fetch_dir) {
  auto c = Connect(a);
  if (!c.ok()) return Fail(c.status());
  if (!std::isfinite(wait_timeout_s)) {
    return Fail(Status::InvalidArgument("--wait-timeout: must be a number of seconds"));
  }
  // Checked before submitting: a bad --fetch must not cost a job's run.
  if (!fetch_dir.empty()) {
    if (Status st = PrepareFetchDir(fetch_dir); !st.ok()) return Fail(st);
  }
  auto spec = ReadFile(file);
  if (!spec.ok()) return Fail(spec.status());
  // The controller parses a spec under its HTTP CPU budget (10% by default:
  // about 1.5 s per MiB on a busy 2-core host). A large one could outlast
  // the request timeout, and the job it creates would run while the CLI
  // says it timed out (and a retry would run it twice): a submit waits
  // longer for each MiB.
  c->timeout += std::chrono::milliseconds(static_cast<int64_t>(
      kSubmitSecondsPerMiB * 1000.0 * static_cast<double>(spec->size()) / (1 << 20)));
  std::string store;
  auto r = Call(*c, "POST", "/api/v1/jobs", *spec, &store);
  if (!r.ok()) return Fail(Status(r.status().code(), file + ": " + r.status().message()));
  // A 201 without a job id is not an hmpmd controller's; taken for one, it
  // would read as "submitted job 0".
  if (!r->is_object() || !(*r)["id"].is_number_unsigned()) {
    return Fail(Status::Internal("POST /api/v1/jobs: the answer has no job id (is " +
                                 c->url().ToString() + " an hmpmd controller?)"));
  }
  const uint64_t id = (*r)["id"].get<uint64_t>();
  if (!wait) {
    if (a.json)
      std::cout << JsonText(json{{"id", id}}) << std::endl;
    else
      std::cout << "submitted job " << id << std::endl;
    return kExitOk;
  }
  // The id before the wait: a user who stops waiting (Ctrl-C) can still
  // follow or cancel the job, and stdout keeps only the final summary.
  std::cerr << "hmpmd: submitted job " << id << "; waiting for it to end" << std::endl;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_timeout_s);
  const std::string target = "/api/v1/jobs/" + std::to_string(id);
  // Why the job waits for workers (its "waiting" field), said once on stderr
  // when it has lasted kWaitingNotice: a short wait (workers registering
  // again after a controller restart) says nothing.
  std::string waiting, told;
  auto waiting_since = std::chrono::steady_clock::now();
  while (true) {
    auto j = PollJob(*c, id, deadline, store);
    if (!j.ok() && j.status().code() == StatusCode::kNotFound) {
      // Accepted, then gone: it ended and other jobs' ends pushed it out of
      // the controller's history before this poll (a small --keep-jobs), or
      // the controller restarted without its --db. Not bad input: exit 1.
      return Fail(Status::Unavailable(
          "job " + std::to_string(id) +
          ": no such job any more: it was forgotten after it ended (the controller's "
          "--keep-jobs, --keep-hours) or the controller restarted without its --db"));
    }
    if (!j.ok()) return Fail(j.status());
    std::string state = (*j).value("state", "");
    std::string now_waiting;
    if (auto w = j->find("waiting"); w != j->end() && w->is_string() && !Terminal(state)) {
      now_waiting = w->get<std::string>();
    }
    if (now_waiting != waiting) {
      waiting = now_waiting;
      waiting_since = std::chrono::steady_clock::now();
    }
    // A job cancelled while it waited did not go on: its summary says so.
    if (waiting.empty() && !told.empty() && state != "cancelled") {
      std::cerr << "hmpmd: job " << id << " no longer waits for workers" << std::endl;
      told.clear();
    } else if (!waiting.empty() && waiting != told &&
               std::chrono::steady_clock::now() - waiting_since >= kWaitingNotice) {
      std::cerr << "hmpmd: job " << id << " waits for workers: " << OneLine(waiting) << std::endl;
      told = waiting;
    }
    if (Terminal(state)) {
      if (a.json)
        std::cout << j->dump(2) << std::endl;
      else
        PrintJob(*j);
      if (state == "succeeded" && !fetch_dir.empty()) {
        // Through outages too: the controller may restart right as the
        // job ends, and answers 503 while workers report what they hold.
        auto outs = PollJob(*c, id, deadline, store, "/outputs");
        if (!outs.ok()) return Fail(outs.status());
        Status fetched = FetchOutputsTo(*outs, static_cast<JobId>(id), fetch_dir, a.timeout_s);
        if (!fetched.ok()) return Fail(fetched);
        if (!a.json)
          std::cout << "outputs written to "
                    << (std::filesystem::path(fetch_dir) / "manifest.json").string() << std::endl;
      }
      return state == "succeeded" ? kExitOk : kExitFailed;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return Fail(Status::Unavailable("job " + std::to_string(id) + " still " + state +
                                      " after --wait-timeout"));
    }
    std::this_thread::sleep_for(kPollPeriod);
  }
}

// `given`: JOB was on the command line (an empty one is an error, not a
// request for the list).
int StatusCmd(const ClientArgs& a, const std::string& job, bool given) {
  auto c = Connect(a);
  if (!c.ok()) return Fail(c.status());
  if (given) {
    auto id = CanonicalJobId(job);
    if (!id.ok()) return Fail(id.status());
    auto j = Call(*c, "GET", "/api/v1/jobs/" + *id);
    if (!j.ok()) return Fail(j.status());
    if (a.json)
      std::cout << j->dump(2) << std::endl;
    else
      PrintJob(*j);
    return kExitOk;
  }
  auto j = Call(*c, "GET", "/api/v1/jobs");
  if (!j.ok()) return Fail(j.status());
  if (a.json) {
    std::cout << j->dump(2) << std::endl;
    return kExitOk;
  }
  // Whose each job is, where jobs have tenants (docs/operations.md).
  bool tenants = false;
  for (const json& e : (*j)["jobs"]) tenants = tenants || e.contains("tenant");
  std::printf("%-6s %-24s %-10s %-14s %s\n", "ID", "NAME", "STATE", "PROGRESS",
              tenants ? "SUBMITTED                   TENANT" : "SUBMITTED");
  for (const json& e : (*j)["jobs"]) {
    const std::string progress = std::to_string(e.value("done", uint64_t{0})) + "/" +
                                 std::to_string(e.value("tasks", uint64_t{0}));
    const json at = e.value("submitted_at", json());
    std::string last = at.is_string() ? at.get<std::string>() : "-";
    if (tenants) last = Column(last, 27) + " " + e.value("tenant", std::string("-"));
    std::printf("%-6llu %s %-10s %-14s %s\n",
                static_cast<unsigned long long>(e.value("id", uint64_t{0})),
                Column(e.value("name", ""), 24).c_str(), e.value("state", "").c_str(),
                progress.c_str(), last.c_str());
  }
  return kExitOk;
}

int CancelCmd(const ClientArgs& a, const std::string& job) {
  auto c = Connect(a);
  if (!c.ok()) return Fail(c.status());
  auto id = CanonicalJobId(job);
  if (!id.ok()) return Fail(id.status());
  auto j = Call(*c, "DELETE", "/api/v1/jobs/" + *id);
  if (!j.ok()) return Fail(j.status());
  if (a.json)
    std::cout << j->dump(2) << std::endl;
  else
    std::cout << "cancelled job " << *id << std::endl;
  return kExitOk;
}

// `hmpmd fetch JOB DIR`: what `submit --wait --fetch` does, for a job that
// has already ended.
int FetchCmd(const ClientArgs& a, const std::string& job, const std::string& dir) {
  auto c = Connect(a);
  if (!c.ok()) return Fail(c.status());
  auto id = CanonicalJobId(job);
  if (!id.ok()) return Fail(id.status());
  auto j = Call(*c, "GET", "/api/v1/jobs/" + *id);
  if (!j.ok()) return Fail(j.status());
  const std::string state = j->value("state", "");
  if (state != "succeeded") {
    return Fail(Status::InvalidArgument("job " + *id + " is " + state +
                                        ": only a succeeded job's final outputs can be fetched"));
  }
  if (Status st = PrepareFetchDir(dir); !st.ok()) return Fail(st);
  auto outs = Call(*c, "GET", "/api/v1/jobs/" + *id + "/outputs");
  if (!outs.ok()) return Fail(outs.status());
  Status fetched = FetchOutputsTo(*outs, static_cast<JobId>(std::stoull(*id)), dir, a.timeout_s);
  if (!fetched.ok()) return Fail(fetched);
  if (!a.json) {
    std::cout << "outputs written to " << (std::filesystem::path(dir) / "manifest.json").string()
              << std::endl;
  }
  return kExitOk;
}

int ForgetCmd(const ClientArgs& a, const std::string& job) {
  auto c = Connect(a);
  if (!c.ok()) return Fail(c.status());
  auto id = CanonicalJobId(job);
  if (!id.ok()) return Fail(id.status());
  auto j = Call(*c, "DELETE", "/api/v1/jobs/" + *id + "?forget=true");
  if (!j.ok()) return Fail(j.status());
  if (a.json) {
    std::cout << j->dump(2) << std::endl;
  } else {
    std::cout << "forgot job " << *id << "; the workers free its outputs ("
              << j->value("freed_bytes", uint64_t{0}) << " bytes)" << std::endl;
  }
  return kExitOk;
}

// 1536 -> "1.5 KiB": what a worker's object store holds.
std::string Bytes(uint64_t n) {
  if (n < 1024) return std::to_string(n) + " B";
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n) / 1024;
  size_t u = 0;
  for (; v >= 1024 && u + 1 < std::size(units); ++u) v /= 1024;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

int PoolCmd(const ClientArgs& a) {
  auto c = Connect(a);
  if (!c.ok()) return Fail(c.status());
  auto j = Call(*c, "GET", "/api/v1/pool");
  if (!j.ok()) return Fail(j.status());
  if (a.json) {
    std::cout << j->dump(2) << std::endl;
    return kExitOk;
  }
  std::printf("%-4s %-24s %-7s %-8s %-10s %-20s %s\n", "DEV", "NAME", "ALIVE", "PID", "STORED",
              "LABELS", "CORES (queued)");
  for (const json& d : (*j)["devices"]) {
    std::string cores;
    for (const json& core : d["cores"]) {
      cores += core.value("name", "") + "(" + std::to_string(core.value("queued", 0)) + ") ";
    }
    // "suspect": its connection closed; dead unless it comes back soon.
    const char* alive = !d.value("alive", false)      ? "no"
                        : d.value("suspected", false) ? "suspect"
                                                      : "yes";
    std::string labels;
    if (d.contains("labels") && d["labels"].is_object()) {
      for (const auto& [key, value] : d["labels"].items()) {
        if (!labels.empty()) labels += ",";
        labels += key + "=" + (value.is_string() ? value.get<std::string>() : value.dump());
      }
    }
    if (labels.empty()) labels = "-";
    std::printf("%-4u %s %-7s %-8u %-10s %s %s\n", d.value("id", 0u),
                Column(d.value("name", ""), 24).c_str(), alive, d.value("pid", 0u),
                Bytes(d.value("store_bytes", uint64_t{0})).c_str(), Column(labels, 20).c_str(),
                cores.c_str());
  }
  std::printf("policy %s, %zu live devices\n", (*j).value("policy", "").c_str(),
              static_cast<size_t>((*j).value("alive_devices", 0)));
  return kExitOk;
}

void AddCommon(CLI::App* sub, ClientArgs* a) {
  sub->add_option("--url", a->url,
                  "Controller REST API (default $HMPMD_URL or http://127.0.0.1:8080); a primary's "
                  "and its standbys' separated by commas")
      ->each([a](const std::string&) { a->url_given = true; });
  sub->add_option("--token-file", a->token_file,
                  "File holding the controller's token (default: $HMPMD_TOKEN_FILE, else "
                  "~/.config/hmpmd/token if it exists)");
  sub->add_flag("--json", a->json, "Print JSON");
  sub->add_option("--request-timeout", a->timeout_s, "Seconds per HTTP request")
      ->check(FiniteRange(0.001, 86400.0))
      ->capture_default_str();
}

}  // namespace

void AddClientCommands(CLI::App& app, int* exit_code) {
  {
    auto a = std::make_shared<ClientArgs>();
    auto file = std::make_shared<std::string>();
    auto wait = std::make_shared<bool>(false);
    auto wait_timeout = std::make_shared<double>(3600);
    CLI::App* sub = app.add_subcommand("submit", "Submit a job spec to a controller");
    sub->add_option("job", *file, "Job spec (JSON)")->required();
    sub->add_flag("--wait", *wait, "Wait for the job to end and print its summary");
    sub->add_option("--wait-timeout", *wait_timeout, "Seconds --wait waits at most")
        ->check(FiniteRange(0.001, 1e7))
        ->capture_default_str();
    auto fetch = std::make_shared<std::string>();
    sub->add_option("--fetch", *fetch,
                    "With --wait: fetch the job's final outputs from the workers holding them "
                    "into this directory (one .bin file per buffer and manifest.json)")
        ->check(NonEmptyPath("a directory"));
    AddCommon(sub, a.get());
    sub->callback([=] {
      if (!fetch->empty() && !*wait) {
        *exit_code = Fail(Status::InvalidArgument("--fetch: needs --wait"));
        return;
      }
      *exit_code = Submit(*a, *file, *wait, *wait_timeout, *fetch);
    });
  }
  {
    auto a = std::make_shared<ClientArgs>();
    auto job = std::make_shared<std::string>();
    CLI::App* sub = app.add_subcommand("status", "Show one job, or list jobs");
    CLI::Option* given = sub->add_option("job", *job, "Job id (omit to list jobs)");
    AddCommon(sub, a.get());
    sub->callback([=] { *exit_code = StatusCmd(*a, *job, given->count() > 0); });
  }
  {
    auto a = std::make_shared<ClientArgs>();
    auto job = std::make_shared<std::string>();
    CLI::App* sub = app.add_subcommand("cancel", "Cancel a job");
    sub->add_option("job", *job, "Job id")->required();
    AddCommon(sub, a.get());
    sub->callback([=] { *exit_code = CancelCmd(*a, *job); });
  }
  {
    auto a = std::make_shared<ClientArgs>();
    auto job = std::make_shared<std::string>();
    CLI::App* sub = app.add_subcommand(
        "forget", "Forget an ended job now: its outputs are freed on the workers");
    sub->add_option("job", *job, "Job id")->required();
    AddCommon(sub, a.get());
    sub->callback([=] { *exit_code = ForgetCmd(*a, *job); });
  }
  {
    auto a = std::make_shared<ClientArgs>();
    auto job = std::make_shared<std::string>();
    auto dir = std::make_shared<std::string>();
    CLI::App* sub = app.add_subcommand(
        "fetch", "Fetch a succeeded job's final outputs from the workers holding them into DIR");
    sub->add_option("job", *job, "Job id")->required();
    sub->add_option("dir", *dir, "Directory (created; must be empty)")
        ->required()
        ->check(NonEmptyPath("a directory"));
    AddCommon(sub, a.get());
    sub->callback([=] { *exit_code = FetchCmd(*a, *job, *dir); });
  }
  {
    auto a = std::make_shared<ClientArgs>();
    CLI::App* sub = app.add_subcommand("pool", "Show the devices and cores of the pool");
    AddCommon(sub, a.get());
    sub->callback([=] { *exit_code = PoolCmd(*a); });
  }
}

}  // namespace hmpmd
