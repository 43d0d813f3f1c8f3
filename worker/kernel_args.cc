#include "hmpmd/worker/kernel_args.h"

#include <cmath>
#include <stdexcept>
#include <variant>

namespace hmpmd::worker {

ActorState& KernelArgs::state() const {
  if (state_ == nullptr) {
    throw std::logic_error(
        "KernelArgs::state(): no actor state here (the kernel was not run by a "
        "Worker)");
  }
  return state_->Get();
}

const ArgValue* KernelArgs::Find(std::string_view name) const {
  for (const Arg& a : *args_) {
    if (a.name == name) return &a.value;
  }
  return nullptr;
}

bool KernelArgs::Has(std::string_view name) const { return Find(name) != nullptr; }

int64_t KernelArgs::Int(std::string_view name, int64_t fallback) const {
  const ArgValue* v = Find(name);
  if (v == nullptr) return fallback;
  if (const auto* i = std::get_if<int64_t>(v)) return *i;
  if (const auto* d = std::get_if<double>(v)) {
    // 2^63 is exactly representable, so the range test is exact.
    constexpr double kLimit = 9223372036854775808.0;
    if (std::isfinite(*d) && std::trunc(*d) == *d && *d >= -kLimit && *d < kLimit) {
      return static_cast<int64_t>(*d);
    }
  }
  return fallback;
}

double KernelArgs::Number(std::string_view name, double fallback) const {
  const ArgValue* v = Find(name);
  if (v == nullptr) return fallback;
  if (const auto* i = std::get_if<int64_t>(v)) return static_cast<double>(*i);
  if (const auto* d = std::get_if<double>(v)) return *d;
  return fallback;
}

std::string KernelArgs::String(std::string_view name, std::string_view fallback) const {
  const ArgValue* v = Find(name);
  if (v != nullptr) {
    if (const auto* s = std::get_if<std::string>(v)) return *s;
  }
  return std::string(fallback);
}

bool KernelArgs::Bool(std::string_view name, bool fallback) const {
  const ArgValue* v = Find(name);
  if (v != nullptr) {
    if (const auto* b = std::get_if<bool>(v)) return *b;
  }
  return fallback;
}

}  // namespace hmpmd::worker
