// The compiled part of the Python package `hmpmd` (hmpmd._hmpmd, whose
// names hmpmd/__init__.py re-exports): bindings of the driver API
// (hmpmd::client) and of the embeddable worker (worker_binding.h).
//
//   import hmpmd
//   with hmpmd.Client.connect("tcp://127.0.0.1:5555", session="demo") as c:
//       x = c.submit("scale", args={"n": 4, "factor": 2.0})
//       y = c.submit("add", inputs=[x, x])
//       print(y.get(timeout_ms=10000)[0])  # a numpy array
//
// Every call that may block (connect, wait, get, wait_any, close, abort,
// cancel, submit, and deleting a Client) releases the GIL while it waits,
// so other Python threads run; connect, wait, get, wait_any, close and abort
// also take Ctrl-C (KeyboardInterrupt) while they wait. A `with` block left
// by an exception aborts the session instead of waiting for its tasks.
// Errors raise hmpmd.Error subclasses (see convert.h) with the one-line
// message of the C++ Status.
//
// Thread-safety: the C++ objects are thread-safe (see client.h); the
// bindings add no state of their own.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "convert.h"
#include "hmpmd/client/client.h"
#include "hmpmd/protocol/one_line.h"
#include "ndarray.h"
#include "worker_binding.h"

namespace py = pybind11;

namespace hmpmd::python {
namespace {

using client::Actor;
using client::Call;
using client::Client;
using client::ClientOptions;
using client::Future;

// Raises KeyboardInterrupt (or what another signal handler raised) when a
// signal came while the GIL was released.
void RaiseIfSignalled() {
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

// Blocks until `wait_for(ms)` (a wait of at most ms) returns anything but
// DeadlineExceeded or `timeout_ms` (client::kForever: no limit) passes, in
// short waits with the GIL released and a check for signals between them:
// one blocking wait ignored Ctrl-C until the task ended. Returns false when
// the time ran out first; else the caller makes the real call, which
// answers at once.
template <typename Slice>
bool WaitInterruptibly(int64_t timeout_ms, Slice wait_for) {
  // -2 waited forever, as FOREVER (-1) does, without a word.
  if (timeout_ms < 0 && timeout_ms != client::kForever) {
    Raise(Status::InvalidArgument("timeout_ms: must be at least 0, or hmpmd.FOREVER (-1)"));
  }
  constexpr int64_t kSliceMs = 50;
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    int64_t slice = kSliceMs;
    bool last = false;
    if (timeout_ms >= 0) {
      const int64_t spent = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::steady_clock::now() - start)
                                .count();
      slice = std::clamp<int64_t>(timeout_ms - spent, 0, kSliceMs);
      last = timeout_ms - spent <= kSliceMs;
    }
    Status s;
    {
      py::gil_scoped_release release;
      s = wait_for(slice);
    }
    if (s.code() != StatusCode::kDeadlineExceeded) return true;
    if (last) return false;
    RaiseIfSignalled();
  }
}

// Ends the session as close() (kFinish) or a `with` block left by an
// exception (kAbort) do, in short waits with the GIL released. Ctrl-C
// stops the wait at once: what is left is aborted (the controller is told,
// its answer not awaited) and KeyboardInterrupt raised. One blocking
// Close() ignored Ctrl-C for its whole close_timeout_ms (for ever with -1).
Status CloseInterruptibly(Client& c, Client::CloseMode mode) {
  constexpr int64_t kSliceMs = 50;
  {
    py::gil_scoped_release release;
    c.BeginClose(mode, c.options().close_timeout_ms);
  }
  bool interrupted = false;
  for (;;) {
    std::optional<Status> done;
    {
      py::gil_scoped_release release;
      done = c.PollClose(kSliceMs);
    }
    if (done) {
      if (interrupted) throw py::error_already_set();  // set by PyErr_CheckSignals
      return *done;
    }
    if (!interrupted && PyErr_CheckSignals() != 0) {
      interrupted = true;
      py::gil_scoped_release release;
      c.BeginClose(Client::CloseMode::kAbort, 0);
    }
  }
}

bool Finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

// Deletes a Client with the GIL released: its destructor aborts the session
// and waits for the controller to confirm, which held up every other Python
// thread while the GIL was held.
struct DeleteWithoutGil {
  void operator()(Client* c) const {
    // At interpreter exit the GIL must stay where it is.
    if (c == nullptr || Finalizing() || !PyGILState_Check()) {
      delete c;
      return;
    }
    py::gil_scoped_release release;
    delete c;
  }
};
using ClientHolder = std::unique_ptr<Client, DeleteWithoutGil>;

// The keyword arguments every submit-like method takes, after `kernel`.
#define HMPMD_CALL_KWARGS                                                                         \
  py::arg("args") = py::none(), py::arg("inputs") = std::vector<Future>{},                        \
  py::arg("core") = "cube", py::arg("actor") = "", py::arg("label") = "", py::arg("flops") = 0.0, \
  py::arg("bytes") = 0.0, py::arg("collective") = py::none(), py::arg("max_retries") = 0,         \
  py::arg("retry_on") = py::none(), py::arg("requires") = py::none()

void BindFuture(py::module_& m) {
  py::class_<Future>(m, "Future",
                     "The eventual outputs of one submitted task. Pass it in `inputs` of a "
                     "later call to chain tasks (the data moves worker to worker).")
      .def_property_readonly("ready", &Future::ready, "True once the task has ended.")
      .def_property_readonly("label", &Future::label, "The task's id in its session.")
      .def_property_readonly("job", &Future::job, "The session's job id.")
      .def_property_readonly("output_bytes", &Future::output_bytes,
                             "Size of its outputs; 0 until it is done.")
      .def(
          "wait",
          [](const Future& f, int64_t timeout_ms) {
            if (!WaitInterruptibly(timeout_ms, [&](int64_t ms) { return f.Wait(ms); })) {
              Check(Status::DeadlineExceeded("task '" + f.label() + "' not ended within " +
                                             std::to_string(timeout_ms) + " ms"));
            }
            Status s;
            {
              py::gil_scoped_release release;
              s = f.Wait(0);  // ended (or empty): at once
            }
            Check(s);
          },
          py::arg("timeout_ms") = client::kForever,
          "Blocks until the task ends. Raises TaskFailed (with the kernel's message), "
          "Cancelled, Timeout or Unavailable.")
      .def(
          "get",
          [](const Future& f, int64_t timeout_ms) {
            const auto start = std::chrono::steady_clock::now();
            if (!WaitInterruptibly(timeout_ms, [&](int64_t ms) { return f.Wait(ms); })) {
              Check(Status::DeadlineExceeded("task '" + f.label() + "' not ended within " +
                                             std::to_string(timeout_ms) + " ms"));
            }
            // Ended: what is left of the timeout bounds the fetch.
            int64_t left = timeout_ms;
            if (timeout_ms >= 0) {
              left = std::max<int64_t>(
                  1, timeout_ms - std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::steady_clock::now() - start)
                                      .count());
            }
            Result<std::vector<Buffer>> r = Status::Internal("unset");
            {
              py::gil_scoped_release release;
              r = f.Get(left);
            }
            RaiseIfSignalled();  // it ends a fetch (EINTR) early
            // The arrays view the fetched buffers, which they keep alive.
            auto held = std::make_shared<const std::vector<Buffer>>(Unwrap(std::move(r)));
            if (f.is_put() && held->size() == 1) return ValueOf(held->front(), held);
            py::list out;
            for (const Buffer& b : *held) out.append(ValueOf(b, held));
            return py::object(std::move(out));
          },
          py::arg("timeout_ms") = client::kForever,
          "Waits, then fetches the task's outputs from its worker: a list with, for each, a "
          "read-only numpy array (dtype and shape as stored), bytes (dtype 'bytes') or a "
          "Buffer (a dtype numpy does not know). For a put: the one value put.")
      .def_property_readonly("is_put", &Future::is_put, "True for the Future of Client.put.")
      .def("__eq__", [](const Future& a, const Future& b) { return a == b; })
      .def("__hash__",
           [](const Future& f) { return std::hash<std::string>()(f.label()) ^ f.job(); })
      .def("__repr__", [](const Future& f) {
        if (!f.valid()) return std::string("Future(empty)");
        return "Future(job=" + std::to_string(f.job()) + ", label='" + f.label() + "', " +
               (f.ready() ? "ready" : "pending") + ")";
      });
}

void BindCall(py::module_& m) {
  py::class_<Call>(m, "Call", "One task for Client.submit_graph (same fields as Client.submit).")
      .def(py::init([](std::string kernel, const py::object& args, std::vector<Future> inputs,
                       const std::string& core, std::string actor, std::string label, double flops,
                       double bytes, const py::object& collective, const py::object& max_retries,
                       const py::object& retry_on, const py::object& requires_) {
             return MakeCall(std::move(kernel), args, std::move(inputs), core, std::move(actor),
                             std::move(label), flops, bytes, collective, max_retries, retry_on,
                             requires_);
           }),
           py::arg("kernel"), HMPMD_CALL_KWARGS)
      .def_readwrite("kernel", &Call::kernel)
      .def_property(
          "args", [](const Call& c) { return ArgsToDict(c.args); },
          [](Call& c, const py::dict& d) { c.args = ArgsFromDict(d); })
      .def_readwrite("inputs", &Call::inputs)
      .def_readwrite("actor", &Call::actor)
      .def_readwrite("label", &Call::label)
      .def_readwrite("max_retries", &Call::max_retries)
      .def_readwrite("retry_on", &Call::retry_on)
      .def_readwrite("requires", &Call::required)
      .def_property_readonly("core",
                             [](const Call& c) { return std::string(CoreKindName(c.core)); });
}

void BindActor(py::module_& m) {
  py::class_<Actor>(m, "Actor",
                    "A named sub-model of the session; its workers keep its state between "
                    "tasks (KernelArgs::state() in kernels).")
      .def_property_readonly("name", &Actor::name)
      .def_property_readonly("kind",
                             [](const Actor& a) { return std::string(SubmodelKindName(a.kind())); })
      .def_property_readonly("devices", &Actor::devices)
      .def(
          "call",
          [](const Actor& a, std::string method, const py::object& args, std::vector<Future> inputs,
             const std::string& core, const std::string& actor, std::string label, double flops,
             double bytes, const py::object& collective, const py::object& max_retries,
             const py::object& retry_on, const py::object& requires_) {
            if (!actor.empty() && actor != a.name()) {
              Raise(Status::InvalidArgument("actor: Actor.call runs on '" + a.name() + "', not '" +
                                            OneLine(actor, 256) + "'"));
            }
            Call call = MakeCall(method, args, std::move(inputs), core, a.name(), std::move(label),
                                 flops, bytes, collective, max_retries, retry_on, requires_);
            Result<Future> r = Status::Internal("unset");
            {
              py::gil_scoped_release release;
              r = a.Call(std::move(method), std::move(call));
            }
            return Unwrap(std::move(r));
          },
          py::arg("method"), HMPMD_CALL_KWARGS,
          "Submits a task running kernel `method` on this actor; returns its Future.")
      .def("__repr__", [](const Actor& a) {
        return "Actor('" + a.name() + "', kind=" + std::string(SubmodelKindName(a.kind())) +
               ", devices=" + std::to_string(a.devices()) + ")";
      });
}

void BindClient(py::module_& m) {
  py::class_<Client, ClientHolder>(
      m, "Client",
      "A driver session on a controller. Use Client.connect(...); a `with` block closes it.")
      .def_static(
          "connect",
          [](std::string controller, std::string session, std::string token, uint32_t weight,
             int64_t connect_timeout_ms, int64_t fetch_timeout_ms, int64_t close_timeout_ms,
             uint32_t heartbeat_ms, uint32_t max_batch, int64_t resume_timeout_ms, bool direct_done,
             std::string data_host) {
            ClientOptions o;
            o.controller = std::move(controller);
            o.session = std::move(session);
            o.token = std::move(token);
            o.weight = weight;
            o.connect_timeout_ms = connect_timeout_ms;
            o.fetch_timeout_ms = fetch_timeout_ms;
            o.close_timeout_ms = close_timeout_ms;
            o.heartbeat_ms = heartbeat_ms;
            o.max_batch = max_batch;
            o.resume_timeout_ms = resume_timeout_ms;
            o.direct_done = direct_done;
            o.data_host = std::move(data_host);
            Result<std::unique_ptr<Client>> r = Status::Internal("unset");
            {
              py::gil_scoped_release release;
              r = Client::Connect(std::move(o));
            }
            ClientHolder c(r.ok() ? r->release() : nullptr);
            // Ctrl-C ends the wait (EINTR: Unavailable) and wins over its
            // outcome; a session opened meanwhile is aborted.
            RaiseIfSignalled();
            if (!r.ok()) Raise(r.status());
            return c;
          },
          py::arg("controller") = ClientOptions{}.controller,
          py::arg("session") = ClientOptions{}.session, py::arg("token") = "",
          py::arg("weight") = ClientOptions{}.weight,
          py::arg("connect_timeout_ms") = ClientOptions{}.connect_timeout_ms,
          py::arg("fetch_timeout_ms") = ClientOptions{}.fetch_timeout_ms,
          py::arg("close_timeout_ms") = ClientOptions{}.close_timeout_ms,
          py::arg("heartbeat_ms") = ClientOptions{}.heartbeat_ms,
          py::arg("max_batch") = ClientOptions{}.max_batch,
          py::arg("resume_timeout_ms") = ClientOptions{}.resume_timeout_ms,
          py::arg("direct_done") = ClientOptions{}.direct_done,
          py::arg("data_host") = ClientOptions{}.data_host,
          "Connects to the controller (its --listen endpoint) and opens a session.")
      .def(
          "submit",
          [](Client& c, std::string kernel, const py::object& args, std::vector<Future> inputs,
             const std::string& core, std::string actor, std::string label, double flops,
             double bytes, const py::object& collective, const py::object& max_retries,
             const py::object& retry_on, const py::object& requires_) {
            Call call = MakeCall(std::move(kernel), args, std::move(inputs), core, std::move(actor),
                                 std::move(label), flops, bytes, collective, max_retries, retry_on,
                                 requires_);
            Result<Future> r = Status::Internal("unset");
            {
              py::gil_scoped_release release;
              r = c.Submit(std::move(call));
            }
            return Unwrap(std::move(r));
          },
          py::arg("kernel"), HMPMD_CALL_KWARGS,
          "Appends one task to the session; returns its Future at once.")
      .def(
          "submit_graph",
          [](Client& c, std::vector<Call> calls) {
            Result<std::vector<Future>> r = Status::Internal("unset");
            {
              py::gil_scoped_release release;
              r = c.SubmitGraph(std::move(calls));
            }
            return Unwrap(std::move(r));
          },
          py::arg("calls"), "Appends several tasks (a list of Call) at once, all or nothing.")
      .def(
          "put",
          [](Client& c, const py::object& value, const std::string& core) {
            std::vector<Buffer> data;
            data.push_back(BufferFromValue(value, "put"));
            const CoreKind kind = CoreFromString(core);
            Result<Future> r = Status::Internal("unset");
            {
              py::gil_scoped_release release;
              r = c.Put(std::move(data), kind);
            }
            return Unwrap(std::move(r));
          },
          py::arg("value"), py::arg("core") = "vector",
          "Puts a numpy array or bytes into the system; returns a Future that any later call "
          "takes as an input and whose get() returns the value (an array keeps its dtype and "
          "shape). The driver keeps a copy, served to workers, until the Future is dropped.")
      .def(
          "create_actor",
          [](Client& c, std::string name, const std::string& kind, uint32_t devices, bool elastic,
             const py::object& requires_) {
            client::ActorOptions o;
            o.name = std::move(name);
            o.kind = SubmodelKindFromString(kind);
            o.devices = devices;
            o.elastic = elastic;
            o.required = LabelsFromDict(requires_, "requires");
            Result<Actor> r = Status::Internal("unset");
            {
              py::gil_scoped_release release;
              r = c.CreateActor(std::move(o));
            }
            return Unwrap(std::move(r));
          },
          py::arg("name"), py::arg("kind") = "actor", py::arg("devices") = 1,
          py::arg("elastic") = true, py::arg("requires") = py::none(),
          "Adds a named sub-model holding `devices` devices (0: any); elastic=False pins them; "
          "requires={'accel': '910c'}: its devices must have these labels.")
      .def(
          "wait_any",
          [](Client& c, std::vector<Future> futures, int64_t timeout_ms) {
            if (!WaitInterruptibly(timeout_ms, [&](int64_t ms) {
                  Result<size_t> r = c.WaitAny(futures, ms);
                  return r.ok() ? Status::Ok() : r.status();
                })) {
              Check(Status::DeadlineExceeded("WaitAny: none of " + std::to_string(futures.size()) +
                                             " tasks ended within " + std::to_string(timeout_ms) +
                                             " ms"));
            }
            Result<size_t> r = Status::Internal("unset");
            {
              py::gil_scoped_release release;
              r = c.WaitAny(futures, 0);  // one has ended (or the call is refused): at once
            }
            return Unwrap(std::move(r));
          },
          py::arg("futures"), py::arg("timeout_ms") = client::kForever,
          "Blocks until one of `futures` is ready; returns its index.")
      .def(
          "cancel",
          [](Client& c, const Future& f) {
            Status s;
            {
              py::gil_scoped_release release;
              s = c.Cancel(f);
            }
            Check(s);
          },
          py::arg("future"), "Cancels a task not yet ended (a no-op once it has).")
      .def(
          "close", [](Client& c) { Check(CloseInterruptibly(c, Client::CloseMode::kFinish)); },
          "Waits for every task, then ends the session; raises TaskFailed when the job failed. "
          "Ctrl-C aborts the session instead (KeyboardInterrupt).")
      .def(
          "abort", [](Client& c) { Check(CloseInterruptibly(c, Client::CloseMode::kAbort)); },
          "Ends the session without waiting for its tasks: those not ended are cancelled "
          "(their futures raise Cancelled). Raises as close() does for the session's outcome.")
      .def_property_readonly("job", &Client::job)
      .def_property_readonly("session", &Client::session)
      .def_property_readonly("in_flight", &Client::in_flight)
      .def(
          "__enter__", [](Client& c) -> Client& { return c; }, py::return_value_policy::reference)
      .def("__exit__", [](Client& c, const py::object& type, const py::object&, const py::object&) {
        // Left by an exception (Ctrl-C included): nothing waits for the
        // tasks; the exception on its way wins over the session's outcome.
        if (!type.is_none()) {
          (void)CloseInterruptibly(c, Client::CloseMode::kAbort);
          return false;
        }
        Check(CloseInterruptibly(c, Client::CloseMode::kFinish));
        return false;
      });
}

}  // namespace

PYBIND11_MODULE(_hmpmd, m) {
  m.doc() =
      "HyperMPMD driver API: connect to a controller, submit tasks, chain their futures, "
      "wait, cancel, and read outputs.";
  m.attr("FOREVER") = client::kForever;
  RegisterExceptions(m);
  BindBuffer(m);
  BindFuture(m);
  BindCall(m);
  BindActor(m);
  BindClient(m);
  BindWorker(m);
}

}  // namespace hmpmd::python
