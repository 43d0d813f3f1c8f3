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
  // Two f32 inputs of one size are added; other inputs are ordering-only
  // edges and the operands are generated.
  if (inputs.size() == 2 && inputs[0].dtype == "f32" && inputs[1].dtype == "f32" &&
      inputs[0].data.size() == inputs[1].data.size()) {
    a = ReadF32(inputs[0], "add", "inputs[0]");
    b = ReadF32(inputs[1], "add", "inputs[1]");
    shape = ShapeOf(inputs[0], a.size());
  } else {
    const int64_t n = SizeArg(args, "add", "n", kDefaultElements);
    a = Generated(n, 1);
    b = Generated(n, 2);
    shape = {n};
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
  // One f32 input is scaled; other inputs are ordering-only edges.
  if (inputs.size() == 1 && inputs[0].dtype == "f32") {
    v = ReadF32(inputs[0], "scale", "inputs[0]");
    shape = ShapeOf(inputs[0], v.size());
  } else {
    const int64_t n = SizeArg(args, "scale", "n", kDefaultElements);
    v = Generated(n, 1);
    shape = {n};
  }
  for (float& x : v) x *= factor;
  std::vector<Buffer> out;
  out.push_back(MakeF32(v, std::move(shape)));
  return out;
}

}  // namespace hmpmd::worker
