// CurveZMQ key files for `hmpmd keygen`, `hmpmd controller --curve-keys DIR`
// and `hmpmd-worker --curve-keys DIR`.
//
// A key directory holds Z85 text files (40 characters each):
//   controller.pub / controller.key   the controller's key pair
//   worker.pub / worker.key           a worker key pair
//   authorized/*.pub                  worker public keys the controller lets in
// keygen writes all of them (worker.pub also into authorized/). Copy the
// directory to workers without controller.key; to let another worker in,
// make its pair elsewhere and drop its .pub into authorized/.
// Secret files are written with mode 0600.
// Thread-safety: free functions without shared state.
#pragma once

#include <set>
#include <string>

#include "hmpmd/protocol/status.h"
#include "hmpmd/protocol/zap_handler.h"

namespace hmpmd {

// True when this libzmq was built with CURVE (libsodium).
bool CurveAvailable();

// Makes the key directory (see above); refuses to overwrite existing keys.
Status WriteCurveKeys(const std::string& dir);

struct CurveServerKeys {
  std::string secret;             // controller.key
  std::set<std::string> allowed;  // authorized/*.pub
};
Result<CurveServerKeys> LoadCurveServerKeys(const std::string& dir);

struct CurveClientKeys {
  std::string server_public;  // controller.pub
  std::string public_key;     // worker.pub
  std::string secret;         // worker.key
};
Result<CurveClientKeys> LoadCurveClientKeys(const std::string& dir);

// Whether a ZAP request (ZapHandler) carries one of the `allowed` public
// keys (Z85) over CURVE. The caller logs a refusal.
bool CurveKeyAllowed(const ZapRequest& r, const std::set<std::string>& allowed);

}  // namespace hmpmd
