// The shared token on disk, and whether an endpoint needs one.
//
// No port beyond loopback opens without a secret: a controller bound
// elsewhere with neither --token-file nor --curve-keys makes a token and
// keeps it in DefaultTokenPath(), a file only its user can read. Workers,
// `hmpmd` commands and drivers given no token read that same file, so on
// one host nothing changes for the user (docs/operations.md, "Access control").
//
// Thread-safety: plain functions; they read the environment and the disk.
#pragma once

#include <string>
#include <string_view>

#include "hmpmd/protocol/status.h"

namespace hmpmd {

// $HMPMD_TOKEN_FILE, else $XDG_CONFIG_HOME/hmpmd/token, else
// $HOME/.config/hmpmd/token; empty when none of those is set.
std::string DefaultTokenPath();

// The first line of `path`, blanks at its end dropped. InvalidArgument,
// naming the path, for a missing, unreadable, empty or oversized file.
Result<std::string> ReadTokenFile(const std::string& path);

// The token in DefaultTokenPath(), or "" when no file is there (a file that
// is there but cannot be read is an error naming it).
Result<std::string> ReadDefaultToken();

// For a refusal of a peer that was given no token and so used
// ReadDefaultToken()'s answer (`found`: a token was there): where it looked,
// so that a worker or driver on another host learns what to give, e.g.
// "; it was given no token and found none in /home/u/.config/hmpmd/token
// (give it the controller's token file)".
std::string DefaultTokenHint(bool found);

// The token in `path`, or, when no file is there, a new one (64 hex digits
// from getrandom) written to it with mode 0600, its folder made with 0700.
// `*made` says which. A file every user may read or change is refused: the
// token would not be a secret.
Result<std::string> LoadOrMakeToken(const std::string& path, bool* made);

// True for a host only this machine reaches: 127.0.0.0/8, ::1, localhost
// (any case), the interface name lo. "*", 0.0.0.0, "" and every other host
// are reachable from elsewhere.
bool IsLoopbackHost(std::string_view host);
// A ZeroMQ endpoint to bind: ipc:// and inproc:// stay on this machine;
// tcp://HOST:PORT when IsLoopbackHost(HOST).
bool IsLoopbackEndpoint(std::string_view endpoint);
// HOST:PORT (or [V6]:PORT) as --http takes it.
bool IsLoopbackHostPort(std::string_view host_port);

}  // namespace hmpmd
