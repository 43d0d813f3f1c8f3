// Test helpers for the data plane: float32 tensors that tell (producer,
// run) apart, compared element by element, and a producer (a worker's data
// socket with its own store) on 127.0.0.1.
// Thread-safety: Values and SameValues are pure; a Producer serves from its
// own thread (DataServer) while the test thread puts outputs in its store.
#pragma once

#include <gtest/gtest.h>
#include <spdlog/logger.h>

#include <cstring>

#include "data_server.h"
#include "data_tokens.h"
#include "hmpmd/protocol/buffer.h"
#include "hmpmd/protocol/data_auth.h"
#include "hmpmd/protocol/zap_handler.h"
#include "object_store.h"
#include "test_data_token.h"

namespace hmpmd::worker::testing {

// n f32 values that tell `seed` (a producer, a run) apart.
inline Buffer Values(size_t n, uint32_t seed) {
  Buffer b;
  b.shape = {static_cast<int64_t>(n)};
  b.data.resize(n * sizeof(float));
  for (size_t i = 0; i < n; ++i) {
    const float v = static_cast<float>(seed) * 4096.0f + static_cast<float>(i % 4093);
    std::memcpy(b.data.data() + i * sizeof(float), &v, sizeof(float));
  }
  return b;
}

// Element by element: `got` holds exactly Values(n, seed).
inline ::testing::AssertionResult SameValues(const Buffer& got, size_t n, uint32_t seed) {
  const Buffer want = Values(n, seed);
  if (got.data.size() != want.data.size()) {
    return ::testing::AssertionFailure() << got.data.size() << " bytes, want " << want.data.size();
  }
  for (size_t i = 0; i < n; ++i) {
    float a, b;
    std::memcpy(&a, got.data.data() + i * sizeof(float), sizeof(float));
    std::memcpy(&b, want.data.data() + i * sizeof(float), sizeof(float));
    if (a != b) return ::testing::AssertionFailure() << "element " << i << ": " << a << " != " << b;
  }
  return ::testing::AssertionSuccess();
}

// A worker's data socket with its own store, bound on 127.0.0.1; it
// accepts hmpmd::testing::kTestDataToken.
struct Producer {
  Producer() : server(&store, &states, &inbox, &tokens, &log) {
    EXPECT_TRUE(server.Bind("127.0.0.1").ok());
  }
  spdlog::logger log{"producer"};
  ObjectStore store{0};
  ActorStates states;
  CollectiveInbox inbox;
  DataTokens tokens{hmpmd::testing::kTestDataToken};
  DataServer server;
};

// Lets every peer into the PLAIN server sockets of `ctx`: raw ROUTERs that
// stand in for data sockets (made so with MakeFakeDataSocket) take the
// credentials peers present. Declare it after `ctx`, before the sockets.
struct AdmitAll {
  explicit AdmitAll(zmq::context_t* ctx) : zap(ctx, [](const ZapRequest&) { return true; }) {
    EXPECT_TRUE(zap.Start().ok());
  }
  ZapHandler zap;
};

// Makes a raw ROUTER (before it binds) one that peers connect to as to a
// data socket; its context needs an AdmitAll.
inline void MakeFakeDataSocket(zmq::socket_t& router) { MakeDataServer(router); }

// Makes a raw DEALER (before it connects) one that a data socket lets in:
// it presents `token`.
inline void PresentToken(zmq::socket_t& dealer,
                         const DataToken& token = hmpmd::testing::kTestDataToken) {
  SetDataCredentials(dealer, token);
}

}  // namespace hmpmd::worker::testing
