// Labels: key=value pairs a worker advertises (`--label accel=910c`, a
// device file's "labels") and a task or sub-model requires ("requires" in a
// job spec). A task runs only on a device whose labels include every pair
// it requires (docs/scheduling.md, "Labels").
//
// Thread-safety: value types and free functions; safe from any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "hmpmd/protocol/status.h"

namespace hmpmd {

// Labels of one device or one task, at most kMaxLabels; keys and values are
// 1 to kMaxLabelBytes bytes of UTF-8 without control characters, and a key
// has no '='.
inline constexpr size_t kMaxLabels = 64;
inline constexpr size_t kMaxLabelBytes = 255;

struct Label {
  std::string key;
  std::string value;
  template <typename Ar>
  void Serialize(Ar& ar) {
    ar(key, value);
  }
  friend bool operator==(const Label&, const Label&) = default;
  friend auto operator<=>(const Label&, const Label&) = default;
};
// Sorted by key, each key once (AddLabel keeps them so).
using Labels = std::vector<Label>;

// "accel=910c".
std::string LabelText(const Label& label);
// "accel=910c, zone=a".
std::string LabelsText(const Labels& labels);

// Check one key or one value against the rules above; errors read
// "key: empty", "value: contains the control character U+000A".
Status CheckLabelKey(std::string_view key);
Status CheckLabelValue(std::string_view value);
// Both, with `where` (e.g. "--label") before the error.
Status CheckLabel(std::string_view where, const Label& label);

// Inserts `label` into the sorted `labels`. A key already there with the
// same value is a no-op; with another value it is InvalidArgument naming
// both. More than kMaxLabels is InvalidArgument too. `where` starts the
// message.
Status AddLabel(std::string_view where, Label label, Labels* labels);

// `given` (in any order, e.g. from the wire) checked one by one
// (CheckLabel) and added (AddLabel): sorted, each key once.
Result<Labels> CheckedLabels(std::string_view where, std::vector<Label> given);

// "KEY=VALUE" as the --label flag takes it, checked (CheckLabel).
Result<Label> ParseLabelFlag(std::string_view text);

// True when `have` holds every pair of `want` (both sorted).
bool HasLabels(const Labels& have, const Labels& want);

}  // namespace hmpmd
