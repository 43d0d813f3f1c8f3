#include "worker_binding.h"

#include <pybind11/stl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "convert.h"
#include "hmpmd/protocol/labels.h"
#include "hmpmd/protocol/one_line.h"
#include "hmpmd/worker/actor_state.h"
#include "hmpmd/worker/worker.h"
#include "ndarray.h"

namespace py = pybind11;

namespace hmpmd::python {
namespace {

using worker::KernelArgs;
using worker::TaskInfo;
using worker::TaskLog;
using worker::WorkerOptions;

// The actor-state slot that holds a sub-model's Python object.
constexpr char kStateSlot[] = "python";

// References to Python objects dropped on a thread without the GIL (a lane
// releasing its actor state, the I/O thread freeing a job): such a thread
// must never wait for the GIL, so the reference waits here until a thread
// that holds it (the next Python kernel, Worker.run()'s wait) lets it go.
std::mutex g_dropped_mu;
std::vector<PyObject*> g_dropped;  // guarded by g_dropped_mu

void DropLater(PyObject* o) {
  if (PyGILState_Check() != 0) {
    Py_DECREF(o);
    return;
  }
  std::lock_guard<std::mutex> lock(g_dropped_mu);
  g_dropped.push_back(o);
}

// REQUIRES: the GIL.
void DropPending() {
  std::vector<PyObject*> now;
  {
    std::lock_guard<std::mutex> lock(g_dropped_mu);
    now.swap(g_dropped);
  }
  for (PyObject* o : now) Py_DECREF(o);
}

// A strong reference kept in an ActorState (which holds shared_ptr<void>).
struct StateRef {
  explicit StateRef(py::object o) : obj(o.release().ptr()) {}
  ~StateRef() { DropLater(obj); }
  PyObject* obj;
};

// "ValueError: bad shape": the type and message of the exception being
// handled, on one line.
std::string OneLineError(const py::error_already_set& e) {
  std::string type = "Exception";
  std::string message;
  try {
    type = py::str(e.type().attr("__name__")).cast<std::string>();
    message = py::str(e.value()).cast<std::string>();
  } catch (const std::exception&) {
    message = e.what();
  }
  return OneLine(message.empty() ? type : type + ": " + message, 4096);
}

// A sub-model's Python state pickled for another worker that loads it
// (ActorState::Export, on the data thread, which must never wait for the
// GIL either): the request waits here for a thread that holds the GIL (a
// kernel, or Worker.run()'s wait, which it wakes) to pickle it.
struct ExportRequest {
  std::shared_ptr<void> held;  // the StateRef, alive until pickled
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;            // guarded by mu
  std::optional<Buffer> bytes;  // guarded by mu; set when it pickled
  std::string error;            // guarded by mu; else why not
};
std::mutex g_exports_mu;
std::vector<std::shared_ptr<ExportRequest>> g_exports;  // guarded by g_exports_mu

// Wakes Worker.run()'s wait before its 50 ms tick: an export is asked
// for, or the worker stopped.
std::mutex g_wake_mu;
std::condition_variable g_wake_cv;
bool g_wake = false;  // guarded by g_wake_mu

void WakeRunLoops() {
  {
    std::lock_guard<std::mutex> lock(g_wake_mu);
    g_wake = true;
  }
  g_wake_cv.notify_all();
}

// How long a load waits for the Python side to pickle the state.
constexpr auto kExportWait = std::chrono::seconds(60);

Result<Buffer> ExportState(const std::shared_ptr<void>& held) {
  auto req = std::make_shared<ExportRequest>();
  req->held = held;
  {
    std::lock_guard<std::mutex> lock(g_exports_mu);
    g_exports.push_back(req);
  }
  WakeRunLoops();
  std::unique_lock<std::mutex> lock(req->mu);
  if (!req->cv.wait_for(lock, kExportWait, [&] { return req->done; })) {
    return Status::Unavailable("the Python worker did not pickle the state within 60 s");
  }
  if (!req->bytes) return Status::InvalidArgument(req->error);
  return std::move(*req->bytes);
}

// REQUIRES: the GIL.
void ServeExports() {
  std::vector<std::shared_ptr<ExportRequest>> now;
  {
    std::lock_guard<std::mutex> lock(g_exports_mu);
    if (g_exports.empty()) return;
    now.swap(g_exports);
  }
  py::object dumps = py::module_::import("pickle").attr("dumps");
  for (const std::shared_ptr<ExportRequest>& req : now) {
    std::optional<Buffer> bytes;
    std::string error;
    try {
      py::handle obj(static_cast<StateRef*>(req->held.get())->obj);
      py::bytes pickled = dumps(obj, -1);  // the highest protocol
      const std::string_view view = pickled;
      Buffer b;
      b.dtype = "u8";
      b.shape = {static_cast<int64_t>(view.size())};
      b.data.resize(view.size());
      std::memcpy(b.data.data(), view.data(), view.size());
      bytes = std::move(b);
    } catch (py::error_already_set& e) {
      error = "ctx.state cannot be pickled: " + OneLineError(e);
    }
    std::lock_guard<std::mutex> lock(req->mu);
    req->bytes = std::move(bytes);
    req->error = std::move(error);
    req->done = true;
    req->cv.notify_all();
  }
}

}  // namespace

// What a Python kernel gets as `ctx`. Valid while its kernel runs; after
// that every call raises (it would reach a task that has ended).
class KernelContext {
 public:
  explicit KernelContext(const KernelArgs* args)
      : args_(args),
        info_(*args->task()),
        task_id_(args->task()->task_id),
        kernel_(args->task()->kernel),
        submodel_(args->task()->submodel),
        task_log_(args->log()) {}

  void End() { args_ = nullptr; }

  const KernelArgs& args() const {
    if (args_ == nullptr) {
      Raise(Status::InvalidArgument("KernelContext: the task ended; keep what you need in state"));
    }
    return *args_;
  }
  uint32_t job() const { return info_.job; }
  uint32_t run() const { return info_.run; }
  uint32_t attempt() const { return info_.attempt; }
  const std::string& task_id() const { return task_id_; }
  const std::string& kernel() const { return kernel_; }
  const std::string& submodel() const { return submodel_; }
  std::string core() const { return std::string(CoreKindName(info_.core)); }
  uint32_t lane() const { return info_.lane; }
  // "job 3 task 'enc' run 5 attempt 0 relu"
  std::string Tag() const {
    return "job " + std::to_string(info_.job) + " task '" + OneLine(task_id_, 256) + "' run " +
           std::to_string(info_.run) + " attempt " + std::to_string(info_.attempt) + " " + kernel_;
  }

  bool cancelled() const { return args().cancelled(); }

  py::object state() const {
    worker::ActorState& state = args().state();
    std::shared_ptr<void> held = state.GetObject(kStateSlot);
    if (held != nullptr) {
      return py::reinterpret_borrow<py::object>(static_cast<StateRef*>(held.get())->obj);
    }
    // Loaded from another worker (pickled there): made an object again by
    // the first kernel that reads it.
    std::optional<Buffer> loaded = state.TakeLoadedObject(kStateSlot);
    if (!loaded) return py::none();
    py::object obj = py::module_::import("pickle").attr("loads")(
        py::bytes(reinterpret_cast<const char*>(loaded->data.data()), loaded->data.size()));
    set_state(obj);
    return obj;
  }
  void set_state(py::object value) const {
    args().state().PutObject(kStateSlot, std::make_shared<StateRef>(std::move(value)), ExportState);
  }

  py::object log() {
    if (!log_) {
      // Its lines also go to the task's TaskLog, which the controller keeps
      // with the task; shared, so a logger kept past the call is harmless
      // (TaskLog ignores lines after the result has gone).
      py::object sink = py::none();
      if (task_log_) {
        sink = py::cpp_function([log = task_log_](const std::string& line) { log->Add(line); });
      }
      log_ = py::module_::import("hmpmd._tasklog").attr("TaskLogger")(Tag(), sink);
    }
    return log_;
  }

 private:
  const KernelArgs* args_;
  const TaskInfo info_;  // its views are not read after the call: the copies below are
  const std::string task_id_;
  const std::string kernel_;
  const std::string submodel_;
  const std::shared_ptr<TaskLog> task_log_;
  py::object log_;
};

namespace {

// One registered Python kernel. Owned through a shared_ptr by the C++
// Kernel; the last owner drops it with the GIL (the Worker is destroyed
// from Python).
struct PyKernel {
  std::string name;
  std::optional<CoreKind> core;
  py::object fn;
};

std::vector<Buffer> CallKernel(const PyKernel& k, const KernelArgs& args,
                               std::span<const Buffer> inputs) {
  if (args.task() == nullptr) throw std::logic_error("a Python kernel runs only in a Worker");
  if (k.core && args.task()->core != *k.core) {
    throw std::invalid_argument("kernel '" + k.name + "' is registered for " +
                                std::string(CoreKindName(*k.core)) + " cores, not " +
                                std::string(CoreKindName(args.task()->core)));
  }
  std::string error;
  std::vector<Buffer> out;
  {
    py::gil_scoped_acquire gil;
    DropPending();
    ServeExports();
    auto ctx = std::make_shared<KernelContext>(&args);
    try {
      py::list arrays;
      for (const Buffer& b : inputs) {
        // The keeper owns `inputs` (a Worker always passes one): the views
        // stay valid if the kernel keeps them past the call.
        if (args.inputs_keeper() != nullptr) {
          arrays.append(ViewAsArray(b, args.inputs_keeper()));
        } else {
          auto copy = std::make_shared<const Buffer>(b);
          arrays.append(ViewAsArray(*copy, copy));
        }
      }
      py::object result = k.fn(py::cast(ctx), arrays, ArgsToDict(args.args()));
      out = BuffersFromResult(result, "kernel '" + k.name + "' returned");
    } catch (py::error_already_set& e) {
      error = OneLineError(e);
    }
    ctx->End();
  }
  if (!error.empty()) throw std::runtime_error(error);
  return out;
}

// hmpmd.Worker.
class PyWorker {
 public:
  explicit PyWorker(WorkerOptions options) : worker_(std::move(options)) {}
  ~PyWorker() {
    // Run() may still serve on its thread (a run() left by an exception in
    // another thread): it is stopped and joined without the GIL, which its
    // lanes may be waiting for.
    worker_.Stop();
    if (runner_.joinable()) {
      if (PyGILState_Check() != 0) {
        py::gil_scoped_release release;
        runner_.join();
      } else {
        runner_.join();
      }
    }
  }

  void Register(const py::object& name, const py::object& core, const py::object& fn) {
    if (!py::isinstance<py::str>(name)) {
      Raise(Status::InvalidArgument(
          "kernel name: must be a str, not " +
          py::str(py::type::handle_of(name).attr("__name__")).cast<std::string>()));
    }
    auto k = std::make_shared<PyKernel>();
    k->name = name.cast<std::string>();
    if (k->name.empty()) Raise(Status::InvalidArgument("kernel name: empty"));
    if (!core.is_none()) {
      if (!py::isinstance<py::str>(core)) {
        Raise(Status::InvalidArgument("core: must be 'cube', 'vector' or None"));
      }
      k->core = CoreFromString(core.cast<std::string>());
    }
    if (!PyCallable_Check(fn.ptr())) {
      Raise(Status::InvalidArgument("kernel '" + k->name + "': not callable"));
    }
    if (started_) {
      Raise(Status::InvalidArgument("kernel '" + k->name + "': the worker is already running"));
    }
    k->fn = fn;
    names_.push_back(k->name);
    worker_.RegisterKernel(k->name, [k](const KernelArgs& args, std::span<const Buffer> inputs) {
      return CallKernel(*k, args, inputs);
    });
  }

  void Run() {
    if (started_) Raise(Status::InvalidArgument("Worker.run: called more than once"));
    started_ = true;
    std::promise<Status> done;
    std::future<Status> result = done.get_future();
    runner_ = std::thread([this, p = std::move(done)]() mutable {
      p.set_value(worker_.Run());
      WakeRunLoops();
    });
    // Ctrl-C (or what a signal handler raised): taken off the interpreter
    // at once, so no Python code runs with it pending; raised once the
    // worker has stopped.
    std::optional<py::error_already_set> interrupted;
    for (;;) {
      std::future_status ready;
      {
        py::gil_scoped_release release;
        std::unique_lock<std::mutex> lock(g_wake_mu);
        g_wake_cv.wait_for(lock, std::chrono::milliseconds(50), [] { return g_wake; });
        g_wake = false;
        ready = result.wait_for(std::chrono::seconds(0));
      }
      DropPending();
      ServeExports();
      if (ready == std::future_status::ready) break;
      if (!interrupted && PyErr_CheckSignals() != 0) {
        interrupted.emplace();
        worker_.Stop();
      }
    }
    {
      py::gil_scoped_release release;
      runner_.join();
    }
    if (interrupted) throw *interrupted;
    Check(result.get());
  }

  void Stop() { worker_.Stop(); }
  const std::vector<std::string>& names() const { return names_; }

 private:
  worker::Worker worker_;
  std::thread runner_;
  bool started_ = false;
  std::vector<std::string> names_;
};

worker::LogLevel LogLevelOf(const std::string& level) {
  if (level == "trace") return worker::LogLevel::kTrace;
  if (level == "debug") return worker::LogLevel::kDebug;
  if (level == "info") return worker::LogLevel::kInfo;
  if (level == "warn") return worker::LogLevel::kWarn;
  if (level == "error") return worker::LogLevel::kError;
  if (level == "off") return worker::LogLevel::kOff;
  Raise(Status::InvalidArgument("log_level: '" + level +
                                "' is not trace, debug, info, warn, error or off"));
}

WorkerOptions MakeOptions(std::string controller, const py::dict& cores, std::string name,
                          uint64_t memory_mb, std::string token, std::string data_host,
                          const std::string& log_level, const py::object& labels) {
  WorkerOptions o;
  o.controller_endpoint = std::move(controller);
  o.cube_cores = 0;
  o.vector_cores = 0;
  for (auto [key, value] : cores) {
    if (!py::isinstance<py::str>(key)) Raise(Status::InvalidArgument("cores: keys must be str"));
    const std::string kind = key.cast<std::string>();
    if (!py::isinstance<py::int_>(value) || py::isinstance<py::bool_>(value) ||
        value.cast<int64_t>() < 0 || value.cast<int64_t>() > 256) {
      Raise(Status::InvalidArgument("cores['" + kind + "']: must be an int in [0, 256]"));
    }
    const auto n = static_cast<uint32_t>(value.cast<int64_t>());
    if (kind == "cube") {
      o.cube_cores = n;
    } else if (kind == "vector") {
      o.vector_cores = n;
    } else {
      Raise(Status::InvalidArgument("cores: unknown core kind '" + OneLine(kind, 64) +
                                    "'; expected cube or vector"));
    }
  }
  if (o.cube_cores + o.vector_cores == 0) {
    Raise(Status::InvalidArgument("cores: the worker needs at least one core"));
  }
  o.name = std::move(name);
  o.memory_mb = memory_mb;
  o.token = std::move(token);
  o.data_host = std::move(data_host);
  o.log_level = LogLevelOf(log_level);
  o.labels = LabelsFromDict(labels, "labels");
  // Checked now, so that a bad label fails at the constructor, not at run().
  std::vector<Label> given;
  for (const auto& [key, value] : o.labels) given.push_back({key, value});
  Check(CheckedLabels("labels", std::move(given)).status());
  return o;
}

}  // namespace

void BindWorker(py::module_& m) {
  py::class_<KernelContext, std::shared_ptr<KernelContext>>(
      m, "KernelContext",
      "What a Python kernel gets as its first argument: its task, its sub-model's state, "
      "cancelled() and a logger tagged with the task. Valid while the kernel runs.")
      .def_property_readonly("job", &KernelContext::job)
      .def_property_readonly("task_id", &KernelContext::task_id,
                             "The task's id in its job spec (a driver's label, e.g. 't3').")
      .def_property_readonly("run", &KernelContext::run,
                             "The task run's index in its job (steps count on).")
      .def_property_readonly("attempt", &KernelContext::attempt)
      .def_property_readonly("kernel", &KernelContext::kernel)
      .def_property_readonly("submodel", &KernelContext::submodel)
      .def_property_readonly("core", &KernelContext::core)
      .def_property_readonly("lane", &KernelContext::lane)
      .def_property("state", &KernelContext::state, &KernelContext::set_state,
                    "The Python object this task's (job, sub-model) keeps on this worker "
                    "between tasks; None until a kernel sets it. Freed with the job.")
      .def("cancelled", &KernelContext::cancelled,
           "True once the task was cancelled: return or raise soon.")
      .def_property_readonly("log", &KernelContext::log,
                             "A logging.LoggerAdapter whose lines start with the task "
                             "(\"[job 3 task 'enc' run 5 attempt 0 mykernel] ...\").");

  py::class_<PyWorker>(m, "Worker",
                       "A worker serving Python kernels (and the built-in C++ ones) to a "
                       "controller. Register kernels with @worker.kernel(name), then run().")
      .def(py::init([](std::string controller, const py::dict& cores, std::string name,
                       uint64_t memory_mb, std::string token, std::string data_host,
                       const std::string& log_level, const py::object& labels) {
             return std::make_unique<PyWorker>(
                 MakeOptions(std::move(controller), cores, std::move(name), memory_mb,
                             std::move(token), std::move(data_host), log_level, labels));
           }),
           py::kw_only(), py::arg("controller"),
           py::arg("cores") = py::dict(py::arg("cube") = 1, py::arg("vector") = 1),
           py::arg("name") = "", py::arg("memory_mb") = WorkerOptions{}.memory_mb,
           py::arg("token") = "", py::arg("data_host") = "", py::arg("log_level") = "info",
           py::arg("labels") = py::none())
      .def(
          "kernel",
          [](py::object self, const py::object& name, const py::object& core) {
            // Checked now, so that a bad name or core fails at the
            // decorator's line.
            if (!py::isinstance<py::str>(name)) {
              self.cast<PyWorker&>().Register(name, core, py::none());
            }
            if (!core.is_none()) {
              if (!py::isinstance<py::str>(core)) {
                Raise(Status::InvalidArgument("core: must be 'cube', 'vector' or None"));
              }
              (void)CoreFromString(core.cast<std::string>());
            }
            return py::cpp_function([self, name, core](py::object fn) {
              self.cast<PyWorker&>().Register(name, core, fn);
              return fn;
            });
          },
          py::arg("name"), py::arg("core") = py::none(),
          "Decorator: @worker.kernel('name', core='cube') registers fn(ctx, inputs, args) -> "
          "array | bytes | tuple/list of them | None. core=None runs it on any core kind.")
      .def(
          "register",
          [](PyWorker& w, const py::object& name, const py::object& fn, const py::object& core) {
            w.Register(name, core, fn);
          },
          py::arg("name"), py::arg("fn"), py::arg("core") = py::none(),
          "As the decorator, without one.")
      .def_property_readonly("kernels", &PyWorker::names, "The Python kernels registered.")
      .def("run", &PyWorker::Run,
           "Registers with the controller and serves until stop() or Ctrl-C "
           "(KeyboardInterrupt, after the worker stopped); raises hmpmd.Error when it fails.")
      .def("stop", &PyWorker::Stop, "Makes run() return soon. Safe from any thread.");
}

}  // namespace hmpmd::python
