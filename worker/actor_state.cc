#include "hmpmd/worker/actor_state.h"

#include <cstring>
#include <utility>

namespace hmpmd::worker {

void ActorState::Put(std::string name, Buffer value) {
  auto fresh = std::make_shared<const Buffer>(std::move(value));
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, added] = values_.try_emplace(std::move(name));
  if (!added) bytes_ -= it->second->data.size();
  bytes_ += fresh->data.size();
  it->second = std::move(fresh);
}

std::shared_ptr<const Buffer> ActorState::Get(std::string_view name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : it->second;
}

bool ActorState::Erase(std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = values_.find(name);
  if (it == values_.end()) return false;
  bytes_ -= it->second->data.size();
  values_.erase(it);
  return true;
}

void ActorState::Update(std::string name, const std::function<void(Buffer&)>& fn) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = values_.find(name);
  Buffer value = it == values_.end() ? Buffer{} : *it->second;
  fn(value);  // may throw: nothing changed yet
  auto fresh = std::make_shared<const Buffer>(std::move(value));
  if (it == values_.end()) {
    it = values_.emplace(std::move(name), nullptr).first;
  } else {
    bytes_ -= it->second->data.size();
  }
  bytes_ += fresh->data.size();
  it->second = std::move(fresh);
}

std::vector<std::string> ActorState::Names() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> names;
  names.reserve(values_.size());
  for (const auto& [name, value] : values_) names.push_back(name);
  return names;
}

uint64_t ActorState::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

void ActorState::PutObject(std::string name, std::shared_ptr<void> object,
                           ObjectExporter exporter) {
  Object old;  // dropped after the lock: its deleter may take time
  std::lock_guard<std::mutex> lock(mu_);
  Object& slot = objects_[std::move(name)];
  old = std::move(slot);
  slot = Object{std::move(object), std::move(exporter)};
}

std::shared_ptr<void> ActorState::GetObject(std::string_view name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = objects_.find(name);
  return it == objects_.end() ? nullptr : it->second.value;
}

std::optional<Buffer> ActorState::TakeLoadedObject(std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = loaded_.find(name);
  if (it == loaded_.end()) return std::nullopt;
  Buffer out = std::move(it->second);
  loaded_.erase(it);
  return out;
}

Result<std::vector<std::shared_ptr<const Buffer>>> ActorState::Export() const {
  std::vector<std::pair<std::string, std::shared_ptr<const Buffer>>> values;
  std::vector<std::pair<std::string, Object>> objects;
  std::vector<std::pair<std::string, std::shared_ptr<const Buffer>>> loaded;
  {
    // Snapshots: the exporters run unlocked (a Python one waits for the
    // GIL's holder, which may be a kernel calling into this state).
    std::lock_guard<std::mutex> lock(mu_);
    values.assign(values_.begin(), values_.end());
    objects.assign(objects_.begin(), objects_.end());
    for (const auto& [name, bytes] : loaded_) {
      loaded.emplace_back(name, std::make_shared<const Buffer>(bytes));
    }
  }
  std::string names;
  std::vector<std::shared_ptr<const Buffer>> out(1);
  out.reserve(1 + values.size() + objects.size() + loaded.size());
  const auto add = [&](char kind, const std::string& name, std::shared_ptr<const Buffer> b) {
    names += kind;
    names += name;
    names += '\0';
    out.push_back(std::move(b));
  };
  // The values are immutable snapshots: sent as they are, not copied.
  for (auto& [name, value] : values) add('v', name, std::move(value));
  for (auto& [name, object] : objects) {
    if (object.value == nullptr) continue;
    if (!object.exporter) {
      return Status::InvalidArgument("object '" + name +
                                     "' of the state has no way to be copied to another worker");
    }
    Result<Buffer> bytes = object.exporter(object.value);
    if (!bytes.ok()) {
      return Status::InvalidArgument("object '" + name + "': " + bytes.status().message());
    }
    add('o', name, std::make_shared<const Buffer>(std::move(bytes).value()));
  }
  for (auto& [name, bytes] : loaded) add('o', name, std::move(bytes));
  auto list = std::make_shared<Buffer>();
  list->dtype = "u8";
  list->shape = {static_cast<int64_t>(names.size())};
  list->data.resize(names.size());
  std::memcpy(list->data.data(), names.data(), names.size());
  out[0] = std::move(list);
  return out;
}

Status ActorState::Install(std::vector<Buffer> exported) {
  if (exported.empty()) return Status::Corruption("a state without its list of names");
  const std::string_view names(reinterpret_cast<const char*>(exported[0].data.data()),
                               exported[0].data.size());
  std::vector<std::pair<char, std::string>> entries;
  for (size_t at = 0; at < names.size();) {
    const size_t end = names.find('\0', at);
    if (end == std::string_view::npos || end == at) {
      return Status::Corruption("a state's list of names is malformed");
    }
    entries.emplace_back(names[at], std::string(names.substr(at + 1, end - at - 1)));
    at = end + 1;
  }
  if (entries.size() + 1 != exported.size()) {
    return Status::Corruption("a state names " + std::to_string(entries.size()) +
                              " entries but carries " + std::to_string(exported.size() - 1));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!values_.empty() || !objects_.empty() || !loaded_.empty()) {
    return Status::AlreadyExists("the state is not empty");
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    auto& [kind, name] = entries[i];
    Buffer& b = exported[i + 1];
    if (kind == 'v') {
      bytes_ += b.data.size();
      values_[std::move(name)] = std::make_shared<const Buffer>(std::move(b));
    } else if (kind == 'o') {
      loaded_[std::move(name)] = std::move(b);
    } else {
      values_.clear();
      loaded_.clear();
      bytes_ = 0;
      return Status::Corruption("a state entry of unknown kind");
    }
  }
  return Status::Ok();
}

}  // namespace hmpmd::worker
