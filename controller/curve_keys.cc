#include "hmpmd/controller/curve_keys.h"

#include <sys/stat.h>
#include <zmq.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace hmpmd {
namespace {

namespace fs = std::filesystem;

Result<std::string> ReadKey(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("curve key " + path.string() + ": cannot be read");
  std::string key;
  in >> key;
  if (key.size() != 40) {
    return Status::InvalidArgument("curve key " + path.string() + ": not a 40-character Z85 key");
  }
  return key;
}

Status WriteKey(const fs::path& path, const std::string& key, bool secret) {
  std::ofstream out(path);
  if (!out) return Status::Unavailable("curve key " + path.string() + ": cannot be written");
  out << key << "\n";
  out.close();
  if (secret) ::chmod(path.c_str(), 0600);
  return out ? Status::Ok() : Status::Unavailable("curve key " + path.string() + ": write failed");
}

}  // namespace

bool CurveAvailable() { return zmq_has("curve") != 0; }

Status WriteCurveKeys(const std::string& dir) {
  if (!CurveAvailable()) {
    return Status::Unavailable("this libzmq has no CURVE support (built without libsodium)");
  }
  fs::path d(dir);
  std::error_code ec;
  fs::create_directories(d / "authorized", ec);
  if (ec) return Status::Unavailable("keygen: " + dir + ": " + ec.message());
  for (const char* f : {"controller.key", "worker.key"}) {
    if (fs::exists(d / f)) {
      return Status::AlreadyExists("keygen: " + (d / f).string() + " exists; not overwritten");
    }
  }
  char pub[41], sec[41];
  if (zmq_curve_keypair(pub, sec) != 0) return Status::Internal("zmq_curve_keypair failed");
  RETURN_IF_ERROR(WriteKey(d / "controller.pub", pub, false));
  RETURN_IF_ERROR(WriteKey(d / "controller.key", sec, true));
  if (zmq_curve_keypair(pub, sec) != 0) return Status::Internal("zmq_curve_keypair failed");
  RETURN_IF_ERROR(WriteKey(d / "worker.pub", pub, false));
  RETURN_IF_ERROR(WriteKey(d / "worker.key", sec, true));
  return WriteKey(d / "authorized" / "worker.pub", pub, false);
}

Result<CurveServerKeys> LoadCurveServerKeys(const std::string& dir) {
  if (!CurveAvailable()) {
    return Status::Unavailable("--curve-keys: this libzmq has no CURVE support");
  }
  CurveServerKeys keys;
  ASSIGN_OR_RETURN(keys.secret, ReadKey(fs::path(dir) / "controller.key"));
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(dir) / "authorized", ec)) {
    if (e.path().extension() != ".pub") continue;
    ASSIGN_OR_RETURN(std::string k, ReadKey(e.path()));
    keys.allowed.insert(k);
  }
  if (keys.allowed.empty()) {
    return Status::InvalidArgument("--curve-keys: " + dir + "/authorized holds no .pub key");
  }
  return keys;
}

Result<CurveClientKeys> LoadCurveClientKeys(const std::string& dir) {
  if (!CurveAvailable()) {
    return Status::Unavailable("--curve-keys: this libzmq has no CURVE support");
  }
  CurveClientKeys keys;
  ASSIGN_OR_RETURN(keys.server_public, ReadKey(fs::path(dir) / "controller.pub"));
  ASSIGN_OR_RETURN(keys.public_key, ReadKey(fs::path(dir) / "worker.pub"));
  ASSIGN_OR_RETURN(keys.secret, ReadKey(fs::path(dir) / "worker.key"));
  return keys;
}

bool CurveKeyAllowed(const ZapRequest& r, const std::set<std::string>& allowed) {
  if (r.mechanism == "CURVE" && r.credentials.size() == 1 && r.credentials[0].size() == 32) {
    char z85[41];
    zmq_z85_encode(z85, reinterpret_cast<const uint8_t*>(r.credentials[0].data()), 32);
    if (allowed.count(z85) > 0) return true;
  }
  return false;
}

}  // namespace hmpmd
