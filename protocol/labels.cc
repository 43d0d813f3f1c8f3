#include "hmpmd/protocol/labels.h"

#include <algorithm>

#include "hmpmd/protocol/job_spec.h"

namespace hmpmd {
namespace {

Status CheckPart(std::string_view part, std::string_view text) {
  const std::string at(part);
  if (text.empty()) return Status::InvalidArgument(at + ": empty");
  if (text.size() > kMaxLabelBytes) {
    return Status::InvalidArgument(at + ": longer than the limit of " +
                                   std::to_string(kMaxLabelBytes) + " bytes");
  }
  if (!IsUtf8(text)) return Status::InvalidArgument(at + ": is not valid UTF-8");
  if (std::string c = FirstControlChar(text); !c.empty()) {
    return Status::InvalidArgument(at + ": contains the control character " + c);
  }
  return Status::Ok();
}

}  // namespace

std::string LabelText(const Label& label) { return label.key + "=" + label.value; }

std::string LabelsText(const Labels& labels) {
  std::string out;
  for (const Label& l : labels) {
    if (!out.empty()) out += ", ";
    out += LabelText(l);
  }
  return out;
}

Status CheckLabelKey(std::string_view key) {
  RETURN_IF_ERROR(CheckPart("key", key));
  if (key.find('=') != std::string_view::npos) return Status::InvalidArgument("key: contains '='");
  return Status::Ok();
}

Status CheckLabelValue(std::string_view value) { return CheckPart("value", value); }

Status CheckLabel(std::string_view where, const Label& label) {
  Status st = CheckLabelKey(label.key);
  if (st.ok()) st = CheckLabelValue(label.value);
  if (st.ok()) return st;
  return Status::InvalidArgument(std::string(where) + ": " + st.message());
}

Status AddLabel(std::string_view where, Label label, Labels* labels) {
  auto it = std::lower_bound(labels->begin(), labels->end(), label.key,
                             [](const Label& l, const std::string& k) { return l.key < k; });
  if (it != labels->end() && it->key == label.key) {
    if (it->value == label.value) return Status::Ok();
    return Status::InvalidArgument(std::string(where) + ": " + LabelText(label) +
                                   " conflicts with " + LabelText(*it));
  }
  if (labels->size() >= kMaxLabels) {
    return Status::InvalidArgument(std::string(where) + ": more than " +
                                   std::to_string(kMaxLabels) + " labels");
  }
  labels->insert(it, std::move(label));
  return Status::Ok();
}

Result<Labels> CheckedLabels(std::string_view where, std::vector<Label> given) {
  if (given.size() > kMaxLabels) {
    return Status::InvalidArgument(std::string(where) + ": more than " +
                                   std::to_string(kMaxLabels) + " labels");
  }
  Labels out;
  for (Label& l : given) {
    RETURN_IF_ERROR(CheckLabel(where, l));
    RETURN_IF_ERROR(AddLabel(where, std::move(l), &out));
  }
  return out;
}

Result<Label> ParseLabelFlag(std::string_view text) {
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos) {
    return Status::InvalidArgument("--label: expected KEY=VALUE, found no '='");
  }
  Label label{std::string(text.substr(0, eq)), std::string(text.substr(eq + 1))};
  RETURN_IF_ERROR(CheckLabel("--label", label));
  return label;
}

bool HasLabels(const Labels& have, const Labels& want) {
  return std::includes(have.begin(), have.end(), want.begin(), want.end());
}

}  // namespace hmpmd
