#include "client/job_spec_yaml.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/job_limits.h"
#include "common/read_file.h"
#include "common/utf8.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "yaml-cpp/eventhandler.h"
#include "yaml-cpp/yaml.h"

namespace zbpp::client {
namespace {

namespace pb = google::protobuf;

// The YAML is walked alongside the message's descriptor, so every field of
// the proto (today's and tomorrow's) is read the same way and the key names
// can never drift from the field names.

// Receives the events of a document and drops them (counting documents).
class NullEventHandler final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

std::string Where(const YAML::Mark& mark) {
  if (mark.is_null()) return "";
  return absl::StrCat(" (line ", mark.line + 1, ", column ", mark.column + 1,
                      ")");
}

template <typename... Args>
absl::Status Invalid(const std::string& path, const YAML::Node& node,
                     const Args&... args) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": ", args..., Where(node.Mark())));
}

std::string Join(const std::string& path, const std::string& key) {
  return path.empty() ? key : absl::StrCat(path, ".", key);
}

const char* KindOf(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return "a scalar";
    case YAML::NodeType::Null:
      return "nothing";
    case YAML::NodeType::Undefined:
      break;
  }
  return "an undefined node";
}

// "ValidationMode" -> "VALIDATION_MODE_", the prefix protobuf's style guide
// puts on every value of the enum.
std::string EnumValuePrefix(const pb::EnumDescriptor& type) {
  std::string prefix;
  for (char c : type.name()) {
    if (absl::ascii_isupper(c) && !prefix.empty()) prefix += '_';
    prefix += absl::ascii_toupper(c);
  }
  return prefix + "_";
}

// The spellings a user may write for an enum value: the value name without
// the enum's prefix, in lower case with '-' for '_' ("post").
std::string ShortEnumName(const pb::EnumValueDescriptor& value) {
  std::string name = value.name();
  const std::string prefix = EnumValuePrefix(*value.type());
  if (name.rfind(prefix, 0) == 0) name = name.substr(prefix.size());
  return absl::StrReplaceAll(absl::AsciiStrToLower(name), {{"_", "-"}});
}

absl::StatusOr<const pb::EnumValueDescriptor*> ParseEnum(
    const pb::EnumDescriptor& type, const YAML::Node& node,
    const std::string& path) {
  const std::string& text = node.Scalar();
  if (const pb::EnumValueDescriptor* exact = type.FindValueByName(text)) {
    return exact;
  }
  const std::string upper =
      absl::StrReplaceAll(absl::AsciiStrToUpper(text), {{"-", "_"}});
  for (const std::string& name : {upper, EnumValuePrefix(type) + upper}) {
    if (const pb::EnumValueDescriptor* value = type.FindValueByName(name)) {
      return value;
    }
  }
  std::vector<std::string> known;
  for (int i = 0; i < type.value_count(); ++i) {
    // proto3's "unspecified" (the value 0 of most enums) is no choice to
    // offer; a value 0 with a meaning of its own (TRANSPORT_AUTO) is.
    const pb::EnumValueDescriptor& value = *type.value(i);
    if (value.number() != 0 || !absl::EndsWith(value.name(), "_UNSPECIFIED")) {
      known.push_back(ShortEnumName(value));
    }
  }
  return Invalid(path, node, "expected one of ", absl::StrJoin(known, ", "),
                 "; got \"", text, "\"");
}

// YAML 1.2's spellings of the special floats; absl reads the rest.
bool ParseDouble(const std::string& text, double* out) {
  const std::string lower = absl::AsciiStrToLower(text);
  if (lower == ".inf" || lower == "+.inf") {
    *out = std::numeric_limits<double>::infinity();
    return true;
  }
  if (lower == "-.inf") {
    *out = -std::numeric_limits<double>::infinity();
    return true;
  }
  if (lower == ".nan") {
    *out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  return absl::SimpleAtod(text, out);
}

// Sets one non-message value of `field` (appending when it is repeated) from
// the scalar `node`.
absl::Status SetScalar(const YAML::Node& node, const std::string& path,
                       const pb::FieldDescriptor& field, pb::Message& message) {
  const pb::Reflection& reflection = *message.GetReflection();
  const bool repeated = field.is_repeated();
  const std::string& text = node.Scalar();
  auto wrong = [&](const char* expected) {
    return Invalid(path, node, "expected ", expected, ", got \"", text, "\"");
  };
  switch (field.cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_INT32: {
      int32_t value;
      if (!absl::SimpleAtoi(text, &value)) return wrong("an integer (int32)");
      repeated ? reflection.AddInt32(&message, &field, value)
               : reflection.SetInt32(&message, &field, value);
      break;
    }
    case pb::FieldDescriptor::CPPTYPE_INT64: {
      int64_t value;
      if (!absl::SimpleAtoi(text, &value)) return wrong("an integer (int64)");
      repeated ? reflection.AddInt64(&message, &field, value)
               : reflection.SetInt64(&message, &field, value);
      break;
    }
    case pb::FieldDescriptor::CPPTYPE_UINT32: {
      uint32_t value;
      if (!absl::SimpleAtoi(text, &value)) {
        return wrong("a non-negative integer (uint32)");
      }
      repeated ? reflection.AddUInt32(&message, &field, value)
               : reflection.SetUInt32(&message, &field, value);
      break;
    }
    case pb::FieldDescriptor::CPPTYPE_UINT64: {
      uint64_t value;
      if (!absl::SimpleAtoi(text, &value)) {
        return wrong("a non-negative integer (uint64)");
      }
      repeated ? reflection.AddUInt64(&message, &field, value)
               : reflection.SetUInt64(&message, &field, value);
      break;
    }
    case pb::FieldDescriptor::CPPTYPE_DOUBLE: {
      double value;
      if (!ParseDouble(text, &value)) return wrong("a number");
      repeated ? reflection.AddDouble(&message, &field, value)
               : reflection.SetDouble(&message, &field, value);
      break;
    }
    case pb::FieldDescriptor::CPPTYPE_FLOAT: {
      double value;
      if (!ParseDouble(text, &value)) return wrong("a number");
      repeated
          ? reflection.AddFloat(&message, &field, static_cast<float>(value))
          : reflection.SetFloat(&message, &field, static_cast<float>(value));
      break;
    }
    case pb::FieldDescriptor::CPPTYPE_BOOL: {
      bool value;
      if (!YAML::convert<bool>::decode(node, value)) {
        return wrong("true or false");
      }
      repeated ? reflection.AddBool(&message, &field, value)
               : reflection.SetBool(&message, &field, value);
      break;
    }
    case pb::FieldDescriptor::CPPTYPE_STRING:
      // Protobuf cannot carry a `string` that is not UTF-8 (the coordinator
      // would refuse the whole request without saying why); `bytes` can.
      if (field.type() == pb::FieldDescriptor::TYPE_STRING) {
        if (absl::Status utf8 = CheckUtf8(path, text); !utf8.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat(utf8.message(), Where(node.Mark())));
        }
      }
      repeated ? reflection.AddString(&message, &field, text)
               : reflection.SetString(&message, &field, text);
      break;
    case pb::FieldDescriptor::CPPTYPE_ENUM: {
      absl::StatusOr<const pb::EnumValueDescriptor*> value =
          ParseEnum(*field.enum_type(), node, path);
      if (!value.ok()) return value.status();
      repeated ? reflection.AddEnum(&message, &field, *value)
               : reflection.SetEnum(&message, &field, *value);
      break;
    }
    case pb::FieldDescriptor::CPPTYPE_MESSAGE:
      return Invalid(path, node, "expected a mapping, got ", KindOf(node));
  }
  return absl::OkStatus();
}

absl::Status FillMessage(const YAML::Node& node, const std::string& path,
                         pb::Message& message);

// One element of `field`: the value itself, or one entry of a list.
absl::Status SetValue(const YAML::Node& node, const std::string& path,
                      const pb::FieldDescriptor& field, pb::Message& message) {
  const pb::Reflection& reflection = *message.GetReflection();
  if (field.cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
    if (!node.IsMap() && !node.IsNull()) {
      return Invalid(path, node, "expected a mapping, got ", KindOf(node));
    }
    pb::Message* child = field.is_repeated()
                             ? reflection.AddMessage(&message, &field)
                             : reflection.MutableMessage(&message, &field);
    return FillMessage(node, path, *child);
  }
  if (node.IsNull()) return Invalid(path, node, "needs a value");
  if (!node.IsScalar()) {
    return Invalid(path, node, "expected a scalar, got ", KindOf(node));
  }
  return SetScalar(node, path, field, message);
}

absl::Status FillMessage(const YAML::Node& node, const std::string& path,
                         pb::Message& message) {
  if (node.IsNull()) return absl::OkStatus();  // `synthetic:` sets it empty.
  const pb::Descriptor& type = *message.GetDescriptor();
  const pb::Reflection& reflection = *message.GetReflection();
  std::set<std::string> seen;
  for (const auto& entry : node) {
    const YAML::Node& key = entry.first;
    const YAML::Node& value = entry.second;
    if (!key.IsScalar()) {
      return Invalid(path.empty() ? "job spec" : path, key,
                     "keys must be plain names, got ", KindOf(key));
    }
    const std::string name = key.Scalar();
    const std::string field_path = Join(path, name);
    const pb::FieldDescriptor* field = type.FindFieldByName(name);
    if (field == nullptr || field->is_map()) {
      std::vector<std::string> known;
      for (int i = 0; i < type.field_count(); ++i) {
        known.push_back(type.field(i)->name());
      }
      return absl::InvalidArgumentError(absl::StrCat(
          field_path, ": unknown key", Where(key.Mark()), "; known",
          path.empty() ? "" : " in " + path, ": ", absl::StrJoin(known, ", ")));
    }
    if (!seen.insert(name).second) {
      return Invalid(field_path, key, "given twice");
    }
    if (const pb::OneofDescriptor* oneof = field->real_containing_oneof();
        oneof != nullptr && reflection.HasOneof(message, oneof)) {
      std::vector<std::string> members;
      for (int i = 0; i < oneof->field_count(); ++i) {
        members.push_back(oneof->field(i)->name());
      }
      return Invalid(
          field_path, key, "conflicts with ",
          Join(path,
               reflection.GetOneofFieldDescriptor(message, oneof)->name()),
          "; set one of ", absl::StrJoin(members, ", "));
    }
    if (!field->is_repeated()) {
      if (absl::Status st = SetValue(value, field_path, *field, message);
          !st.ok()) {
        return st;
      }
      continue;
    }
    if (!value.IsSequence()) {
      return Invalid(field_path, value, "expected a list, got ", KindOf(value));
    }
    for (size_t i = 0; i < value.size(); ++i) {
      if (absl::Status st = SetValue(
              value[i], absl::StrCat(field_path, "[", i, "]"), *field, message);
          !st.ok()) {
        return st;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<zbpp::v1::JobSpec> JobSpecFromYaml(const std::string& text) {
  // Documents are counted before any is built: Debian's yaml-cpp 0.7 never
  // gets past a stray ',' at the top level (",a"), reporting an empty
  // document at the same place forever, so YAML::LoadAll would loop,
  // allocating, until memory runs out (found by
  // tests/fuzz/job_spec_yaml_fuzz). Only the first document is built.
  constexpr int kMaxDocuments = 1000;
  int count = 0;
  YAML::Node first;
  try {
    std::istringstream in(text);
    YAML::Parser parser(in);
    NullEventHandler ignore;
    while (count < kMaxDocuments && parser.HandleNextDocument(ignore)) ++count;
    if (count == 1) first = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("yaml: not YAML", Where(e.mark), ": ", e.msg));
  }
  if (count > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "yaml: ", count == kMaxDocuments ? "at least " : "", count,
        " YAML documents; a job spec is one"));
  }
  const std::vector<YAML::Node> documents =
      count == 0 ? std::vector<YAML::Node>{} : std::vector<YAML::Node>{first};
  if (documents.empty() || documents[0].IsNull()) {
    return absl::InvalidArgumentError(
        "yaml: empty; expected a mapping of job spec fields (model, dataset, "
        "pipeline, ...)");
  }
  const YAML::Node& root = documents[0];
  if (!root.IsMap()) {
    return Invalid("yaml", root,
                   "expected a mapping of job spec fields (model, dataset, "
                   "pipeline, ...), got ",
                   KindOf(root));
  }
  zbpp::v1::JobSpec spec;
  try {
    if (absl::Status st = FillMessage(root, "", spec); !st.ok()) return st;
  } catch (const YAML::Exception& e) {
    // yaml-cpp throws only on misuse of a node; kept as a Status regardless.
    return absl::InvalidArgumentError(
        absl::StrCat("yaml: ", e.msg, Where(e.mark)));
  }
  return spec;
}

absl::Status LoadScheduleFile(const std::string& spec_path,
                              zbpp::v1::JobSpec& spec) {
  const std::string& file = spec.schedule().file();
  if (file.empty()) return absl::OkStatus();
  if (!spec.schedule().file_text().empty()) {
    return absl::InvalidArgumentError(
        "schedule.file_text: zbppctl fills it from schedule.file; leave it "
        "out of the spec");
  }
  std::string path = file;
  const size_t slash = spec_path.rfind('/');
  if (file.front() != '/' && slash != std::string::npos) {
    path = absl::StrCat(spec_path.substr(0, slash + 1), file);
  }
  absl::StatusOr<std::string> text =
      ReadFileToString(path, absl::StrCat("\"", path, "\""));
  if (!text.ok()) {
    return absl::NotFoundError(
        absl::StrCat("schedule.file: ", text.status().message()));
  }
  if (text->size() > kMaxScheduleFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "schedule.file: \"", path, "\" is over ", kMaxScheduleFileBytes,
        " bytes"));
  }
  spec.mutable_schedule()->set_file_text(*std::move(text));
  return absl::OkStatus();
}

}  // namespace zbpp::client
