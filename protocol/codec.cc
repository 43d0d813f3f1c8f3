// The msgpack side of the protocol. Exceptions from msgpack stop here.
#include "hmpmd/protocol/codec.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <msgpack.hpp>
#include <type_traits>

namespace hmpmd {
namespace {

struct StringSink {
  std::string* out;
  void write(const char* p, size_t n) { out->append(p, n); }
};

// Counts what would be written: exact sizes without building the bytes.
struct CountingSink {
  size_t bytes = 0;
  void write(const char*, size_t n) { bytes += n; }
};

template <typename T>
struct IsVector : std::false_type {};
template <typename T>
struct IsVector<std::vector<T>> : std::true_type {};

template <typename Sink>
class PackArchive {
 public:
  PackArchive(msgpack::packer<Sink>* pk, Sink* sink) : pk_(pk), sink_(sink) {}

  template <typename... T>
  void operator()(T&... fields) {
    pk_->pack_array(sizeof...(T));
    (Pack(fields), ...);
  }

 private:
  template <typename T>
  void Pack(const T& v) {
    if constexpr (std::is_same_v<T, CoreKind>) {
      pk_->pack(static_cast<uint8_t>(v));
    } else if constexpr (std::is_same_v<T, ArgValue>) {
      std::visit([this](const auto& x) { this->PackArg(x); }, v);
    } else if constexpr (std::is_same_v<T, double>) {
      PackArg(v);  // always float64, as the decoder wants (see PackArg)
    } else if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, std::string>) {
      pk_->pack(v);
    } else if constexpr (IsVector<T>::value) {
      pk_->pack_array(static_cast<uint32_t>(v.size()));
      for (const auto& e : v) Pack(e);
    } else {
      const_cast<T&>(v).Serialize(*this);  // Serialize only reads when packing
    }
  }

  template <typename A>
  void PackArg(const A& x) {
    pk_->pack(x);
  }
  // msgpack-c packs an integral double (3.0, 1e19) as an integer, which turns
  // a float argument into an int, or into a uint64 above INT64_MAX that the
  // decoder rejects; so a double is always written as float64 here.
  void PackArg(double d) {
    uint64_t bits = std::bit_cast<uint64_t>(d);
    char buf[9];
    buf[0] = static_cast<char>(0xcb);
    for (int i = 0; i < 8; ++i) buf[1 + i] = static_cast<char>(bits >> (56 - 8 * i));
    sink_->write(buf, sizeof(buf));
  }

  msgpack::packer<Sink>* pk_;
  Sink* sink_;
};

class UnpackArchive {
 public:
  UnpackArchive(const msgpack::object* obj, const DecodeLimits* limits, Status* err)
      : obj_(obj), limits_(limits), err_(err) {}

  template <typename... T>
  void operator()(T&... fields) {
    if (!err_->ok()) return;
    if (obj_->type != msgpack::type::ARRAY || obj_->via.array.size != sizeof...(T)) {
      Fail("expected an array of " + std::to_string(sizeof...(T)) + " fields");
      return;
    }
    [[maybe_unused]] const msgpack::object* items = obj_->via.array.ptr;
    [[maybe_unused]] size_t i = 0;
    (Read(items[i++], fields), ...);
  }

 private:
  void Fail(std::string what) {
    if (err_->ok()) *err_ = Status::Corruption("body: " + std::move(what));
  }

  template <typename T>
  void Read(const msgpack::object& o, T& out) {
    if (!err_->ok()) return;
    if constexpr (std::is_same_v<T, bool>) {
      if (o.type != msgpack::type::BOOLEAN) return Fail("expected a bool");
      out = o.via.boolean;
    } else if constexpr (std::is_same_v<T, CoreKind>) {
      if (o.type != msgpack::type::POSITIVE_INTEGER || o.via.u64 >= kNumCoreKinds) {
        return Fail("core kind out of range");
      }
      out = static_cast<CoreKind>(o.via.u64);
    } else if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T>) {
      if (o.type != msgpack::type::POSITIVE_INTEGER) return Fail("expected an unsigned integer");
      if (o.via.u64 > std::numeric_limits<T>::max()) return Fail("integer out of range");
      out = static_cast<T>(o.via.u64);
    } else if constexpr (std::is_same_v<T, int64_t>) {
      if (o.type == msgpack::type::POSITIVE_INTEGER) {
        if (o.via.u64 > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          return Fail("integer out of range");
        }
        out = static_cast<int64_t>(o.via.u64);
      } else if (o.type == msgpack::type::NEGATIVE_INTEGER) {
        out = o.via.i64;
      } else {
        return Fail("expected an integer");
      }
    } else if constexpr (std::is_same_v<T, double>) {
      if (o.type != msgpack::type::FLOAT64 && o.type != msgpack::type::FLOAT32) {
        return Fail("expected a float");
      }
      out = o.via.f64;
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (o.type != msgpack::type::STR) return Fail("expected a string");
      if (o.via.str.size > limits_->max_string) return Fail("string too long");
      out.assign(o.via.str.ptr, o.via.str.size);
    } else if constexpr (std::is_same_v<T, ArgValue>) {
      switch (o.type) {
        case msgpack::type::BOOLEAN:
          out = o.via.boolean;
          break;
        case msgpack::type::POSITIVE_INTEGER:
        case msgpack::type::NEGATIVE_INTEGER: {
          int64_t v = 0;
          Read(o, v);
          out = v;
          break;
        }
        case msgpack::type::FLOAT32:
        case msgpack::type::FLOAT64:
          out = o.via.f64;
          break;
        case msgpack::type::STR: {
          std::string s;
          Read(o, s);
          out = std::move(s);
          break;
        }
        default:
          return Fail("argument must be an integer, float, bool or string");
      }
    } else if constexpr (IsVector<T>::value) {
      if (o.type != msgpack::type::ARRAY) return Fail("expected an array");
      size_t limit = std::is_same_v<T, Args> ? limits_->max_args : limits_->max_batch;
      if (o.via.array.size > limit) return Fail("array too long");
      out.clear();
      out.resize(o.via.array.size);
      for (size_t i = 0; i < out.size() && err_->ok(); ++i) Read(o.via.array.ptr[i], out[i]);
    } else {
      UnpackArchive nested(&o, limits_, err_);
      out.Serialize(nested);
    }
  }

  const msgpack::object* obj_;
  const DecodeLimits* limits_;
  Status* err_;
};

template <size_t I = 0>
Result<Message> DecodeAs(size_t index, const msgpack::object& obj, const DecodeLimits& limits) {
  if constexpr (I == std::variant_size_v<Message>) {
    return Status::Corruption("header: unknown message type");
  } else {
    if (index != I) return DecodeAs<I + 1>(index, obj, limits);
    std::variant_alternative_t<I, Message> msg;
    Status err;
    UnpackArchive ar(&obj, &limits, &err);
    msg.Serialize(ar);
    if (!err.ok()) return err;
    return Message(std::move(msg));
  }
}

}  // namespace

MsgType TypeOf(const Message& m) { return static_cast<MsgType>(m.index() + 1); }

std::string_view MsgTypeName(MsgType t) {
  switch (t) {
    case MsgType::kRegister:
      return "Register";
    case MsgType::kRegisterAck:
      return "RegisterAck";
    case MsgType::kReject:
      return "Reject";
    case MsgType::kHeartbeat:
      return "Heartbeat";
    case MsgType::kHeartbeatAck:
      return "HeartbeatAck";
    case MsgType::kAssignBatch:
      return "AssignBatch";
    case MsgType::kDoneBatch:
      return "DoneBatch";
    case MsgType::kCancelJob:
      return "CancelJob";
    case MsgType::kShutdown:
      return "Shutdown";
    case MsgType::kFreeJob:
      return "FreeJob";
    case MsgType::kSessionOpen:
      return "SessionOpen";
    case MsgType::kSessionAck:
      return "SessionAck";
    case MsgType::kSessionSubmit:
      return "SessionSubmit";
    case MsgType::kSessionControl:
      return "SessionControl";
    case MsgType::kSessionUpdate:
      return "SessionUpdate";
    case MsgType::kFreeRuns:
      return "FreeRuns";
    case MsgType::kCancelRuns:
      return "CancelRuns";
  }
  return "Unknown";
}

std::string EncodeHeader(MsgType type) {
  return std::string{'H', 'M', static_cast<char>(kProtocolVersion), static_cast<char>(type)};
}

void EncodeBody(const Message& message, std::string* out) {
  StringSink sink{out};
  msgpack::packer<StringSink> pk(sink);
  PackArchive ar(&pk, &sink);
  std::visit([&ar](const auto& m) { const_cast<std::decay_t<decltype(m)>&>(m).Serialize(ar); },
             message);
}

size_t EncodedSize(const SubmitGroup& group) {
  CountingSink sink;
  msgpack::packer<CountingSink> pk(sink);
  PackArchive ar(&pk, &sink);
  const_cast<SubmitGroup&>(group).Serialize(ar);  // Serialize only reads when packing
  return sink.bytes;
}

EncodedFrames Encode(const Message& message) {
  EncodedFrames f;
  f.header = EncodeHeader(TypeOf(message));
  EncodeBody(message, &f.body);
  return f;
}

Result<Message> Decode(std::string_view header, std::string_view body, const DecodeLimits& limits) {
  if (header.size() != kHeaderSize) return Status::Corruption("header: wrong size");
  if (header[0] != 'H' || header[1] != 'M') return Status::Corruption("header: bad magic");
  if (static_cast<uint8_t>(header[2]) != kProtocolVersion) {
    return Status::Corruption("header: protocol version " +
                              std::to_string(static_cast<uint8_t>(header[2])) + ", expected " +
                              std::to_string(kProtocolVersion));
  }
  uint8_t type = static_cast<uint8_t>(header[3]);
  if (type < 1 || type > std::variant_size_v<Message>) {
    return Status::Corruption("header: unknown message type " + std::to_string(type));
  }
  if (body.size() > limits.max_body_bytes) return Status::Corruption("body: too large");
  try {
    // msgpack's array limit covers every array, the fields of a struct
    // included; Read() applies max_batch and max_args to the vectors.
    constexpr size_t kMaxFields = 16;
    size_t max_array = std::max({limits.max_batch, limits.max_args, kMaxFields});
    msgpack::unpack_limit ul(max_array, 64, limits.max_string, limits.max_string, 0, 8);
    size_t off = 0;
    msgpack::object_handle oh =
        msgpack::unpack(body.data(), body.size(), off, nullptr, nullptr, ul);
    if (off != body.size()) return Status::Corruption("body: trailing bytes");
    return DecodeAs(type - 1, oh.get(), limits);
  } catch (const std::exception& e) {
    return Status::Corruption(std::string("body: ") + e.what());
  }
}

Result<Message> Decode(std::span<const std::byte> header, std::span<const std::byte> body,
                       const DecodeLimits& limits) {
  return Decode(std::string_view(reinterpret_cast<const char*>(header.data()), header.size()),
                std::string_view(reinterpret_cast<const char*>(body.data()), body.size()), limits);
}

}  // namespace hmpmd
