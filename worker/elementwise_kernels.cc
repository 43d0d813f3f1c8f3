#include "elementwise_kernels.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "f32_util.h"

namespace hmpmd::worker {
namespace {

constexpr int64_t kDefaultElements = 1024;

std::vector<float> Generated(int64_t n, uint32_t stream) {
  std::vector<float> v(static_cast<size_t>(n));
  FillDeterministic(v, stream);
  return v;
}

std::vector<int64_t> ShapeOf(const Buffer& b, size_t count) {
  if (!b.shape.empty()) return b.shape;
  return {static_cast<int64_t>(count)};
}

}  // namespace

std::vector<Buffer> AddKernel(const KernelArgs& args, std::span<const Buffer> inputs) {
  std::vector<float> a;
  std::vector<float> b;
  std::vector<int64_t> shape;
  if (inputs.empty()) {
    const int64_t n = SizeArg(args, "add", "n", kDefaultElements);
    a = Generated(n, 1);
    b = Generated(n, 2);
    shape = {n};
  } else if (inputs.size() == 2) {
    a = ReadF32(inputs[0], "add", "inputs[0]");
    b = ReadF32(inputs[1], "add", "inputs[1]");
    if (a.size() != b.size()) {
      throw std::invalid_argument("add: inputs[0] has " + std::to_string(a.size()) +
                                  " elements, inputs[1] has " + std::to_string(b.size()));
    }
    shape = ShapeOf(inputs[0], a.size());
  } else {
    throw std::invalid_argument("add: takes 0 or 2 inputs, got " + std::to_string(inputs.size()));
  }
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  std::vector<Buffer> out;
  out.push_back(MakeF32(a, std::move(shape)));
  return out;
}

std::vector<Buffer> ScaleKernel(const KernelArgs& args, std::span<const Buffer> inputs) {
  if (args.Has("factor") && !std::isfinite(args.Number("factor", NAN))) {
    throw std::invalid_argument("scale: argument 'factor' must be a finite number");
  }
  const float factor = static_cast<float>(args.Number("factor", 1.0));
  std::vector<float> v;
  std::vector<int64_t> shape;
  if (inputs.empty()) {
    const int64_t n = SizeArg(args, "scale", "n", kDefaultElements);
    v = Generated(n, 1);
    shape = {n};
  } else if (inputs.size() == 1) {
    v = ReadF32(inputs[0], "scale", "inputs[0]");
    shape = ShapeOf(inputs[0], v.size());
  } else {
    throw std::invalid_argument("scale: takes 0 or 1 input, got " + std::to_string(inputs.size()));
  }
  for (float& x : v) x *= factor;
  std::vector<Buffer> out;
  out.push_back(MakeF32(v, std::move(shape)));
  return out;
}

}  // namespace hmpmd::worker
