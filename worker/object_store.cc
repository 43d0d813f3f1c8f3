#include "object_store.h"

#include <algorithm>
#include <string>

#include "hmpmd/protocol/tensor_bytes.h"

namespace hmpmd::worker {

uint64_t ObjectStore::BytesOf(const BufferList& outputs) {
  uint64_t bytes = 0;
  for (const Buffer& b : outputs) bytes += b.data.size();
  return bytes;
}

Status ObjectStore::Put(JobId job, uint32_t run, BufferList outputs, uint32_t reads) {
  const uint64_t bytes = BytesOf(outputs);
  MutexLock lock(&mu_);
  auto key = std::make_pair(job, run);
  auto old = entries_.find(key);
  const uint64_t replaced = old == entries_.end() ? 0 : old->second.bytes;
  if (cap_bytes_ != 0 && used_ - replaced + bytes > cap_bytes_) {
    return Status::ResourceExhausted(
        "object store: outputs of job " + std::to_string(job) + " run " + std::to_string(run) +
        " need " + std::to_string(bytes) + " bytes; " + std::to_string(used_ - replaced) +
        " of the " + std::to_string(cap_bytes_) + " allowed (--memory-mb) are in use");
  }
  used_ = used_ - replaced + bytes;
  Entry& e = entries_[key];
  // Not a const object: the last holder of a freed list may move its
  // buffers out (DataPlane::GatherInputs).
  // When the last holder (the store, a fetch reply ZeroMQ is sending, a
  // lane) lets go, the large buffers go back to the tensor pool.
  e.outputs = std::shared_ptr<BufferList>(new BufferList(std::move(outputs)), [](BufferList* l) {
    RecycleTensorBytes(std::span<Buffer>(*l));
    delete l;
  });
  e.bytes = bytes;
  e.reads_left = reads;
  return Status::Ok();
}

std::shared_ptr<const BufferList> ObjectStore::Read(JobId job, uint32_t run) {
  MutexLock lock(&mu_);
  auto it = entries_.find({job, run});
  if (it == entries_.end()) return nullptr;
  std::shared_ptr<const BufferList> out = it->second.outputs;
  if (it->second.reads_left > 0 && --it->second.reads_left == 0) {
    used_ -= it->second.bytes;
    entries_.erase(it);
  }
  return out;
}

std::shared_ptr<const BufferList> ObjectStore::Peek(JobId job, uint32_t run) const {
  MutexLock lock(&mu_);
  auto it = entries_.find({job, run});
  return it == entries_.end() ? nullptr : it->second.outputs;
}

std::vector<HeldOutput> ObjectStore::List(size_t max) const {
  MutexLock lock(&mu_);
  std::vector<HeldOutput> out;
  out.reserve(std::min(max, entries_.size()));
  for (const auto& [key, e] : entries_) {
    if (out.size() >= max) break;
    out.push_back(
        HeldOutput{key.first, key.second, e.bytes, static_cast<uint32_t>(e.outputs->size())});
  }
  return out;
}

uint64_t ObjectStore::FreeJob(JobId job) {
  MutexLock lock(&mu_);
  uint64_t freed = 0;
  auto it = entries_.lower_bound({job, 0});
  while (it != entries_.end() && it->first.first == job) {
    freed += it->second.bytes;
    it = entries_.erase(it);
  }
  used_ -= freed;
  return freed;
}

uint64_t ObjectStore::FreeRun(JobId job, uint32_t run) {
  MutexLock lock(&mu_);
  auto it = entries_.find({job, run});
  if (it == entries_.end()) return 0;
  const uint64_t freed = it->second.bytes;
  entries_.erase(it);
  used_ -= freed;
  return freed;
}

uint64_t ObjectStore::used_bytes() const {
  MutexLock lock(&mu_);
  return used_;
}

size_t ObjectStore::entries() const {
  MutexLock lock(&mu_);
  return entries_.size();
}

}  // namespace hmpmd::worker
