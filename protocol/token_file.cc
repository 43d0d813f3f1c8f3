#include "hmpmd/protocol/token_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "hmpmd/protocol/data_token.h"
#include "hmpmd/protocol/read_file.h"

namespace hmpmd {
namespace {

// A token is a line: /dev/zero or a large file named by mistake is refused
// at once rather than read up to ReadFile's 1 GiB.
constexpr size_t kMaxTokenFileBytes = 64 * 1024;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

std::string Errno(int e) { return std::strerror(e); }

// Makes `dir` and its missing parents; the ones made get 0700 (a config
// folder holding secrets), existing ones are left as they are.
Status MakePrivateDirs(const std::filesystem::path& dir) {
  if (dir.empty()) return Status::Ok();
  std::error_code ec;
  if (std::filesystem::is_directory(dir, ec)) return Status::Ok();
  RETURN_IF_ERROR(MakePrivateDirs(dir.parent_path()));
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::InvalidArgument(dir.string() + ": cannot make the folder: " + Errno(errno));
  }
  return Status::Ok();
}

}  // namespace

std::string DefaultTokenPath() {
  if (std::string f = Env("HMPMD_TOKEN_FILE"); !f.empty()) return f;
  if (std::string x = Env("XDG_CONFIG_HOME"); !x.empty()) return x + "/hmpmd/token";
  if (std::string h = Env("HOME"); !h.empty()) return h + "/.config/hmpmd/token";
  return {};
}

Result<std::string> ReadTokenFile(const std::string& path) {
  Result<std::string> text = ReadFile(path, kMaxTokenFileBytes);
  if (!text.ok()) return Status::InvalidArgument(text.status().message());
  std::string token = text->substr(0, text->find_first_of("\r\n"));
  while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) token.pop_back();
  if (token.empty()) return Status::InvalidArgument(path + ": the token file is empty");
  return token;
}

Result<std::string> ReadDefaultToken() {
  const std::string path = DefaultTokenPath();
  if (path.empty()) return std::string();
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 && errno == ENOENT) return std::string();
  return ReadTokenFile(path);
}

std::string DefaultTokenHint(bool found) {
  const std::string path = DefaultTokenPath();
  if (found) return "; it was given no token and sent the one in " + path;
  if (path.empty()) {
    return "; it was given no token, and neither HMPMD_TOKEN_FILE nor HOME is set (give it the "
           "controller's token file)";
  }
  return "; it was given no token and found none in " + path +
         " (give it the controller's token file)";
}

Result<std::string> LoadOrMakeToken(const std::string& path, bool* made) {
  *made = false;
  if (path.empty()) {
    return Status::InvalidArgument(
        "no place to keep one: neither HMPMD_TOKEN_FILE nor HOME is set");
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    // Group access is allowed: an operator may share the file with a
    // service group on purpose (deploy/README.md).
    if ((st.st_mode & S_IRWXO) != 0) {
      return Status::InvalidArgument(path +
                                     ": every user of this host may read or change it; "
                                     "chmod o-rwx it");
    }
    return ReadTokenFile(path);
  }
  if (errno != ENOENT) return Status::InvalidArgument(path + ": " + Errno(errno));
  RETURN_IF_ERROR(MakePrivateDirs(std::filesystem::path(path).parent_path()));
  const std::string token = DataTokenHex(NewDataToken()) + DataTokenHex(NewDataToken());
  // Written whole under a name of its own, then linked to `path`: a
  // worker or a second controller that reads `path` meanwhile finds either
  // no file or the whole token, never an empty one (a second controller
  // that found it empty failed to start). link() fails when
  // `path` exists, so of two controllers starting at once the loser reads
  // the winner's token.
  const std::string temp = path + ".new-" + DataTokenHex(NewDataToken());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Status::InvalidArgument(path + ": cannot write the token: " + Errno(errno));
  const std::string line = token + "\n";
  const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  int error = errno;
  const bool closed = ::close(fd) == 0;
  if (!closed && written) error = errno;
  const bool linked = written && closed && ::link(temp.c_str(), path.c_str()) == 0;
  if (written && closed && !linked) error = errno;
  ::unlink(temp.c_str());
  if (!linked) {
    if (error == EEXIST) return ReadTokenFile(path);
    return Status::InvalidArgument(path + ": cannot write the token: " + Errno(error));
  }
  *made = true;
  return token;
}

bool IsLoopbackHost(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host == "::1" || host == "lo") return true;
  if (host.size() == 9) {
    std::string lower(host);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == "localhost") return true;
  }
  // 127.0.0.0/8, written as a dotted quad.
  if (!host.starts_with("127.")) return false;
  int dots = 0;
  for (char c : host) {
    if (c == '.') {
      ++dots;
    } else if (c < '0' || c > '9') {
      return false;
    }
  }
  return dots == 3;
}

bool IsLoopbackEndpoint(std::string_view endpoint) {
  if (endpoint.starts_with("ipc://") || endpoint.starts_with("inproc://")) return true;
  if (!endpoint.starts_with("tcp://")) return false;
  return IsLoopbackHostPort(endpoint.substr(6));
}

bool IsLoopbackHostPort(std::string_view host_port) {
  const size_t colon = host_port.rfind(':');
  if (colon == std::string_view::npos) return false;
  return IsLoopbackHost(host_port.substr(0, colon));
}

}  // namespace hmpmd
