// The built-in kernels through their public entry, BuiltinKernels().
#include "hmpmd/worker/builtin_kernels.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>

#include "f32_util.h"
#include "hmpmd/worker/actor_state.h"

namespace hmpmd::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

Kernel Find(std::string_view name) {
  for (NamedKernel& k : BuiltinKernels()) {
    if (k.name == name) return std::move(k.kernel);
  }
  ADD_FAILURE() << "no built-in kernel " << name;
  return [](const KernelArgs&, std::span<const Buffer>) { return std::vector<Buffer>{}; };
}

std::vector<float> Floats(const Buffer& b) {
  std::vector<float> v(b.data.size() / sizeof(float));
  std::memcpy(v.data(), b.data.data(), v.size() * sizeof(float));
  return v;
}

std::vector<Buffer> Call(std::string_view kernel, Args raw, std::vector<Buffer> inputs = {}) {
  return Find(kernel)(KernelArgs(raw), inputs);
}

// The plain triple loop, in double, as the reference.
std::vector<float> NaiveGemm(const std::vector<float>& a, const std::vector<float>& b, int64_t m,
                             int64_t n, int64_t k) {
  std::vector<float> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) sum += double{a[i * k + p]} * double{b[p * n + j]};
      c[i * n + j] = static_cast<float>(sum);
    }
  }
  return c;
}

Args Mnk(int64_t m, int64_t n, int64_t k) { return {{"m", m}, {"n", n}, {"k", k}}; }

TEST(BuiltinKernelsTest, ListsEveryBuiltinOfTheProtocol) {
  std::vector<std::string> names;
  for (const NamedKernel& k : BuiltinKernels()) names.push_back(k.name);
  EXPECT_THAT(names, ElementsAreArray(std::begin(kBuiltinKernels), std::end(kBuiltinKernels)));
}

TEST(BuiltinKernelsTest, SendPassesItsInputsOnOrMakesBytes) {
  std::vector<float> v = {1, 2, 3};
  std::vector<Buffer> out = Call("send", {}, {MakeF32(v, {3})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(Floats(out[0]), v);
  out = Call("send", {{"bytes", int64_t{100}}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].data.size(), 100u);
  EXPECT_THROW(Call("send", {{"bytes", int64_t{-1}}}), std::invalid_argument);
  // A collective called outside a gang fails its task.
  EXPECT_THROW(Call("allreduce", {}), std::invalid_argument);
}

struct GemmSize {
  int64_t m, n, k;
};

class GemmTest : public ::testing::TestWithParam<GemmSize> {};

TEST_P(GemmTest, MatchesNaiveTripleLoopOnRandomInputs) {
  const auto [m, n, k] = GetParam();
  const uint32_t seed = 1234;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a(static_cast<size_t>(m * k));
  std::vector<float> b(static_cast<size_t>(k * n));
  for (float& x : a) x = dist(rng);
  for (float& x : b) x = dist(rng);

  std::vector<Buffer> out = Call("gemm", Mnk(m, n, k), {MakeF32(a, {m, k}), MakeF32(b, {k, n})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape, (std::vector<int64_t>{m, n}));
  EXPECT_EQ(out[0].dtype, "f32");
  std::vector<float> c = Floats(out[0]);
  std::vector<float> want = NaiveGemm(a, b, m, n, k);
  ASSERT_EQ(c.size(), want.size());
  // float32 sums of k products of values in [-1, 1].
  const float tolerance = 1e-5f * static_cast<float>(k) + 1e-6f;
  for (size_t i = 0; i < c.size(); ++i) {
    ASSERT_NEAR(c[i], want[i], tolerance) << "element " << i / n << "," << i % n;
  }
}

TEST_P(GemmTest, GeneratedInputsGiveTheExactProduct) {
  const auto [m, n, k] = GetParam();
  std::vector<float> a(static_cast<size_t>(m * k));
  std::vector<float> b(static_cast<size_t>(k * n));
  FillDeterministic(a, 1);
  FillDeterministic(b, 2);
  std::vector<Buffer> out = Call("gemm", Mnk(m, n, k));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape, (std::vector<int64_t>{m, n}));
  // Multiples of 1/8 sum exactly in float32 at these sizes, in any order.
  EXPECT_EQ(Floats(out[0]), NaiveGemm(a, b, m, n, k));
}

// Odd sizes, and sizes that cross the 256-wide blocks and the 4-row tiles.
INSTANTIATE_TEST_SUITE_P(Sizes, GemmTest,
                         ::testing::Values(GemmSize{1, 1, 1}, GemmSize{17, 33, 65},
                                           GemmSize{128, 64, 96}, GemmSize{7, 257, 300},
                                           GemmSize{3, 2, 513}),
                         [](const auto& p) {
                           return std::to_string(p.param.m) + "x" + std::to_string(p.param.n) +
                                  "x" + std::to_string(p.param.k);
                         });

// weights: "state": B is made once in the sub-model's state and read from
// there after; a state loaded from elsewhere is what the product uses.
TEST(BuiltinKernelsTest, GemmWithWeightsInStateKeepsAndUsesThem) {
  struct Fixed final : ActorStateProvider {
    ActorState& Get() const override { return state; }
    mutable ActorState state;
  } provider;
  Args raw = Mnk(3, 2, 4);
  raw.push_back({"weights", std::string("state")});
  const KernelArgs args(raw, nullptr, &provider);
  const std::vector<float> made = Floats(Find("gemm")(args, {})[0]);
  EXPECT_EQ(made, Floats(Call("gemm", Mnk(3, 2, 4))[0]));  // the generated B at first
  std::shared_ptr<const Buffer> kept = provider.state.Get("gemm B 4x2");
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(kept->shape, (std::vector<int64_t>{4, 2}));
  // Weights changed in the state (as a load from another worker would
  // bring): the next product uses them. B = all ones: C's rows sum A's.
  provider.state.Put("gemm B 4x2", MakeF32(std::vector<float>(8, 1.0f), {4, 2}));
  const std::vector<float> a = {1, 2, 3, 4, 0, 0, 0, 0, -1, -1, -1, -1};
  const std::vector<Buffer> inputs = {MakeF32(a, {3, 4})};
  EXPECT_THAT(Floats(Find("gemm")(args, inputs)[0]), ElementsAre(10, 10, 0, 0, -4, -4));
  raw.back().value = std::string("input");
  EXPECT_THAT([&] { Find("gemm")(KernelArgs(raw, nullptr, &provider), {}); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("weights must be")));
}

TEST(BuiltinKernelsTest, GemmRejectsBadArgumentsAndInputs) {
  EXPECT_THROW(Call("gemm", {{"n", int64_t{2}}, {"k", int64_t{2}}}), std::invalid_argument);
  EXPECT_THROW(Call("gemm", Mnk(0, 2, 2)), std::invalid_argument);
  EXPECT_THROW(Call("gemm", Mnk(int64_t{1} << 20, int64_t{1} << 20, 1)), std::invalid_argument);
  std::vector<float> four(4, 1.0f);
  // Inputs that do not fit m, n, k are ordering-only edges: generated
  // operands, the same result as without inputs.
  EXPECT_EQ(Floats(Call("gemm", Mnk(3, 2, 2), {MakeF32(four, {2, 2}), MakeF32(four, {2, 2})})[0]),
            Floats(Call("gemm", Mnk(3, 2, 2))[0]));
  // One input that fits is A; B is generated.
  EXPECT_EQ(Call("gemm", Mnk(2, 2, 2), {MakeF32(four, {2, 2})})[0].shape,
            (std::vector<int64_t>{2, 2}));
  try {
    Call("gemm", {{"n", int64_t{2}}, {"k", int64_t{2}}});
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("'m' is required"));
  }
}

// A cancelled job's multiply stops between row blocks (it held its core
// to the end before: 33 s for the largest allowed size), and one whose task
// is not cancelled runs to the same product as without a flag.
TEST(BuiltinKernelsTest, GemmStopsOnceItsTaskIsCancelled) {
  const Args raw = Mnk(1024, 1024, 1024);
  std::atomic<bool> cancel{true};
  try {
    Find("gemm")(KernelArgs(raw, &cancel), {});
    ADD_FAILURE() << "a cancelled gemm ran to the end";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "gemm: cancelled");
  }
  cancel = false;
  const Args small = Mnk(300, 17, 33);
  EXPECT_EQ(Floats(Find("gemm")(KernelArgs(small, &cancel), {})[0]),
            Floats(Call("gemm", small)[0]));
}

TEST(BuiltinKernelsTest, AddSumsItsInputsAndKeepsTheShape) {
  std::vector<float> a = {1, 2, 3, 4, 5, 6};
  std::vector<float> b = {10, 20, 30, 40, 50, 60};
  std::vector<Buffer> out = Call("add", {}, {MakeF32(a, {2, 3}), MakeF32(b, {6})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_THAT(Floats(out[0]), ElementsAre(11, 22, 33, 44, 55, 66));
}

TEST(BuiltinKernelsTest, AddWithoutInputsAddsTwoGeneratedVectors) {
  std::vector<float> a(5), b(5);
  FillDeterministic(a, 1);
  FillDeterministic(b, 2);
  std::vector<Buffer> out = Call("add", {{"n", int64_t{5}}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape, (std::vector<int64_t>{5}));
  std::vector<float> got = Floats(out[0]);
  ASSERT_EQ(got.size(), 5u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(got[i], a[i] + b[i]);
  EXPECT_EQ(Call("add", {})[0].shape, (std::vector<int64_t>{1024}));
}

TEST(BuiltinKernelsTest, AddTreatsMismatchedInputsAsOrderingAndRejectsLyingOnes) {
  std::vector<float> three(3, 1.0f), two(2, 1.0f);
  const std::vector<float> generated = Floats(Call("add", {{"n", int64_t{4}}})[0]);
  EXPECT_EQ(Floats(Call("add", {{"n", int64_t{4}}}, {MakeF32(three, {3}), MakeF32(two, {2})})[0]),
            generated);
  Buffer f16 = MakeF32(three, {3});
  f16.dtype = "f16";
  EXPECT_EQ(Floats(Call("add", {{"n", int64_t{4}}}, {f16, MakeF32(three, {3})})[0]), generated);
  Buffer lying = MakeF32(three, {4});  // shape says 4 elements, data holds 3
  EXPECT_THROW(Call("add", {}, {lying, MakeF32(three, {3})}), std::invalid_argument);
  EXPECT_THROW(Call("add", {{"n", int64_t{-1}}}), std::invalid_argument);
}

TEST(BuiltinKernelsTest, ScaleMultipliesByFactor) {
  std::vector<float> v = {1, -2, 4};
  std::vector<Buffer> out = Call("scale", {{"factor", 2.5}}, {MakeF32(v, {3})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_THAT(Floats(out[0]), ElementsAre(2.5f, -5.0f, 10.0f));

  std::vector<float> gen(8);
  FillDeterministic(gen, 1);
  std::vector<float> got = Floats(Call("scale", {{"n", int64_t{8}}, {"factor", int64_t{3}}})[0]);
  ASSERT_EQ(got.size(), 8u);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(got[i], gen[i] * 3.0f);
  // No factor: 1.0.
  EXPECT_EQ(Floats(Call("scale", {}, {MakeF32(v, {3})})[0]), v);
  EXPECT_THROW(Call("scale", {{"factor", std::string("two")}}), std::invalid_argument);
}

TEST(BuiltinKernelsTest, SpinAndSleepTakeAtLeastTheirTime) {
  using Clock = std::chrono::steady_clock;
  for (const char* kernel : {"spin", "sleep"}) {
    const auto start = Clock::now();
    EXPECT_TRUE(Call(kernel, {{"us", int64_t{20'000}}}).empty());
    EXPECT_GE(Clock::now() - start, std::chrono::microseconds(20'000)) << kernel;
    EXPECT_THROW(Call(kernel, {{"us", int64_t{-1}}}), std::invalid_argument) << kernel;
  }
  EXPECT_TRUE(Call("noop", {}).empty());
}

// A worker may run a task the controller did not check (an embedding
// program calling a built-in itself): a wrong-typed argument still fails,
// naming it, instead of reading as the default.
TEST(BuiltinKernelsTest, WrongTypedArgumentsFailInsteadOfReadingAsDefaults) {
  const std::string text("10");
  EXPECT_THROW(Call("spin", {{"us", text}}), std::invalid_argument);
  EXPECT_THROW(Call("sleep", {{"us", true}}), std::invalid_argument);
  EXPECT_THROW(Call("send", {{"bytes", text}}), std::invalid_argument);
  EXPECT_THROW(Call("gemm", {{"m", text}, {"n", int64_t{2}}, {"k", int64_t{2}}}),
               std::invalid_argument);
}

}  // namespace
}  // namespace hmpmd::worker
