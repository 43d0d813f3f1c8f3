// ActorState (named buffers of one sub-model), ActorStates (a worker's
// states by job and sub-model) and KernelArgs::state().
#include "hmpmd/worker/actor_state.h"

#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "actor_states.h"
#include "hmpmd/worker/kernel_args.h"

namespace hmpmd::worker {
namespace {

Buffer Int64Buffer(int64_t v) {
  Buffer b;
  b.dtype = "i64";
  b.shape = {1};
  b.data.resize(sizeof v);
  std::memcpy(b.data.data(), &v, sizeof v);
  return b;
}

int64_t Int64Of(const Buffer& b) {
  int64_t v = 0;
  if (b.data.size() == sizeof v) std::memcpy(&v, b.data.data(), sizeof v);
  return v;
}

TEST(ActorStateTest, PutGetEraseAndBytes) {
  ActorState state;
  EXPECT_EQ(state.Get("w"), nullptr);
  state.Put("w", Int64Buffer(3));
  state.Put("v", Int64Buffer(4));
  ASSERT_NE(state.Get("w"), nullptr);
  EXPECT_EQ(Int64Of(*state.Get("w")), 3);
  EXPECT_EQ(state.Get("w")->dtype, "i64");
  EXPECT_EQ(state.bytes(), 16u);
  EXPECT_EQ(state.Names(), (std::vector<std::string>{"v", "w"}));

  std::shared_ptr<const Buffer> before = state.Get("w");
  state.Put("w", Int64Buffer(5));  // replaces; the old snapshot is unchanged
  EXPECT_EQ(Int64Of(*before), 3);
  EXPECT_EQ(Int64Of(*state.Get("w")), 5);
  EXPECT_EQ(state.bytes(), 16u);

  EXPECT_TRUE(state.Erase("w"));
  EXPECT_FALSE(state.Erase("w"));
  EXPECT_EQ(state.Get("w"), nullptr);
  EXPECT_EQ(Int64Of(*before), 3);
  EXPECT_EQ(state.bytes(), 8u);
}

TEST(ActorStateTest, UpdateIsAtomicAcrossThreads) {
  ActorState state;
  constexpr int kThreads = 4, kEach = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&state] {
      for (int i = 0; i < kEach; ++i) {
        state.Update("n", [](Buffer& b) { b = Int64Buffer(Int64Of(b) + 1); });
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(Int64Of(*state.Get("n")), kThreads * kEach);
}

TEST(ActorStateTest, UpdateThatThrowsStoresNothing) {
  ActorState state;
  state.Put("n", Int64Buffer(1));
  EXPECT_THROW(state.Update("n",
                            [](Buffer& b) {
                              b = Int64Buffer(99);
                              throw std::runtime_error("no");
                            }),
               std::runtime_error);
  EXPECT_EQ(Int64Of(*state.Get("n")), 1);
  EXPECT_THROW(state.Update("m", [](Buffer&) { throw std::runtime_error("no"); }),
               std::runtime_error);
  EXPECT_EQ(state.Get("m"), nullptr);
}

TEST(ActorStateTest, ObjectsAreKeptApartFromBuffersAndFreedWithTheState) {
  auto freed = std::make_shared<int>(0);
  {
    auto state = std::make_shared<ActorState>();
    EXPECT_EQ(state->GetObject("python"), nullptr);
    // The deleter counts: it runs once, when the state (and every copy of
    // the object) is gone.
    std::shared_ptr<void> obj(new int(7), [freed](void* p) {
      delete static_cast<int*>(p);
      ++*freed;
    });
    state->PutObject("python", obj);
    obj.reset();
    ASSERT_NE(state->GetObject("python"), nullptr);
    EXPECT_EQ(*static_cast<int*>(state->GetObject("python").get()), 7);
    EXPECT_TRUE(state->Names().empty());  // not a buffer
    EXPECT_EQ(state->bytes(), 0u);
    EXPECT_EQ(*freed, 0);
    // Replaced: the old one goes at once.
    state->PutObject("python", std::make_shared<int>(8));
    EXPECT_EQ(*freed, 1);
    state->PutObject("python", std::shared_ptr<void>(new int(9), [freed](void* p) {
                       delete static_cast<int*>(p);
                       ++*freed;
                     }));
  }
  EXPECT_EQ(*freed, 2);
}

// What a loading worker receives: the exported buffers, by value.
std::vector<Buffer> Received(const std::vector<std::shared_ptr<const Buffer>>& exported) {
  std::vector<Buffer> out;
  for (const auto& b : exported) out.push_back(*b);
  return out;
}

TEST(ActorStateTest, ExportedStateIsInstalledElsewhereAsItWas) {
  ActorState here;
  here.Put("w", Int64Buffer(7));
  here.Put("v", Int64Buffer(-3));
  here.PutObject("python", std::make_shared<int>(5), [](const std::shared_ptr<void>& o) {
    return Result<Buffer>(Int64Buffer(*static_cast<int*>(o.get()) * 10));
  });
  auto exported = here.Export();
  ASSERT_TRUE(exported.ok()) << exported.status().message();
  ASSERT_EQ(exported->size(), 4u);  // the names, two values, one object
  // Values go as the snapshots they are, not copies.
  EXPECT_EQ((*exported)[1], here.Get("v"));

  ActorState there;
  ASSERT_TRUE(there.Install(Received(*exported)).ok());
  EXPECT_EQ(Int64Of(*there.Get("w")), 7);
  EXPECT_EQ(Int64Of(*there.Get("v")), -3);
  EXPECT_EQ(there.bytes(), 16u);
  // The object comes back as its exporter's bytes, once, for the
  // embedding program to make it again.
  EXPECT_EQ(there.GetObject("python"), nullptr);
  std::optional<Buffer> loaded = there.TakeLoadedObject("python");
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(Int64Of(*loaded), 50);
  EXPECT_FALSE(there.TakeLoadedObject("python").has_value());

  // Into a state that is not empty: refused, and it stays as it is.
  EXPECT_EQ(there.Install(Received(*exported)).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(Int64Of(*there.Get("w")), 7);
}

TEST(ActorStateTest, AStateThatCannotBeCopiedSaysWhy) {
  ActorState state;
  state.PutObject("handle", std::make_shared<int>(1));  // no exporter
  auto exported = state.Export();
  ASSERT_FALSE(exported.ok());
  EXPECT_EQ(exported.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(exported.status().message().find("'handle'"), std::string::npos);

  ActorState failing;
  failing.PutObject("python", std::make_shared<int>(1), [](const std::shared_ptr<void>&) {
    return Result<Buffer>(Status::InvalidArgument("cannot pickle a lock"));
  });
  exported = failing.Export();
  ASSERT_FALSE(exported.ok());
  EXPECT_NE(exported.status().message().find("cannot pickle a lock"), std::string::npos);
}

TEST(ActorStateTest, MalformedExportsAreRefused) {
  ActorState state;
  EXPECT_EQ(state.Install({}).code(), StatusCode::kCorruption);
  Buffer names;
  names.dtype = "u8";
  const std::string text = std::string("vw") + '\0' + "xq" + '\0';
  names.data.resize(text.size());
  std::memcpy(names.data.data(), text.data(), text.size());
  // Two names, one buffer.
  EXPECT_EQ(state.Install({names, Int64Buffer(1)}).code(), StatusCode::kCorruption);
  // An entry of unknown kind ('x'): nothing is kept.
  EXPECT_EQ(state.Install({names, Int64Buffer(1), Int64Buffer(2)}).code(), StatusCode::kCorruption);
  EXPECT_TRUE(state.Names().empty());
  EXPECT_EQ(state.bytes(), 0u);
  // A name without its end.
  names.data.pop_back();
  EXPECT_EQ(state.Install({names, Int64Buffer(1), Int64Buffer(2)}).code(), StatusCode::kCorruption);
}

TEST(ActorStatesTest, InstallKeepsAStateMadeMeanwhile) {
  ActorStates states;
  ActorState elsewhere;
  elsewhere.Put("w", Int64Buffer(1));
  auto exported = elsewhere.Export();
  ASSERT_TRUE(exported.ok());
  EXPECT_EQ(states.Find(1, "actor"), nullptr);
  ASSERT_TRUE(states.Install(1, "actor", Received(*exported)).ok());
  EXPECT_EQ(Int64Of(*states.Find(1, "actor")->Get("w")), 1);
  EXPECT_EQ(states.FindByKey(1, StateKey("actor")), states.Find(1, "actor"));
  EXPECT_EQ(states.FindByKey(1, StateKey("learner")), nullptr);
  // A lane made "learner" first: a late load leaves it alone.
  states.For(1, "learner")->Put("w", Int64Buffer(2));
  ASSERT_TRUE(states.Install(1, "learner", Received(*exported)).ok());
  EXPECT_EQ(Int64Of(*states.Find(1, "learner")->Get("w")), 2);
}

TEST(ActorStatesTest, KeyedByJobAndSubmodelAndFreedWithTheJob) {
  ActorStates states;
  states.For(1, "actor")->Put("w", Int64Buffer(7));
  EXPECT_EQ(Int64Of(*states.For(1, "actor")->Get("w")), 7);
  EXPECT_EQ(states.For(1, "learner")->Get("w"), nullptr);
  EXPECT_EQ(states.For(2, "actor")->Get("w"), nullptr);
  EXPECT_EQ(states.size(), 3u);

  std::shared_ptr<ActorState> held = states.For(1, "actor");
  EXPECT_EQ(states.FreeJob(1), 2u);
  EXPECT_EQ(states.FreeJob(1), 0u);
  EXPECT_EQ(states.size(), 1u);
  EXPECT_EQ(Int64Of(*held->Get("w")), 7);                // a holder keeps its snapshot
  EXPECT_EQ(states.For(1, "actor")->Get("w"), nullptr);  // a fresh state afterwards
}

TEST(KernelArgsStateTest, ThrowsWithoutAProviderAndUsesOneWhenGiven) {
  Args raw;
  KernelArgs bare(raw);
  EXPECT_THROW(bare.state(), std::logic_error);

  struct Fixed final : ActorStateProvider {
    ActorState& Get() const override { return state; }
    mutable ActorState state;
  } provider;
  KernelArgs args(raw, nullptr, &provider);
  args.state().Put("x", Int64Buffer(2));
  EXPECT_EQ(Int64Of(*provider.state.Get("x")), 2);
}

}  // namespace
}  // namespace hmpmd::worker
