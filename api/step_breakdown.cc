#include "api/step_breakdown.h"

#include <cstdlib>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

namespace zbpp {
namespace {

using google::protobuf::FieldDescriptor;

const FieldDescriptor& Field(const std::string& name) {
  const FieldDescriptor* field = v1::StepBreakdown::descriptor()->FindFieldByName(name);
  // The names below are job.proto's: a rename there fails every test here.
  if (field == nullptr || field->cpp_type() != FieldDescriptor::CPPTYPE_DOUBLE) std::abort();
  return *field;
}

}  // namespace

double BreakdownPart::Of(const v1::StepBreakdown& b) const {
  return b.GetReflection()->GetDouble(b, &Field(field));
}

const std::vector<BreakdownPart>& SpanParts() {
  static const std::vector<BreakdownPart>* parts = new std::vector<BreakdownPart>{
      {"compute_seconds", "compute"},
      {"input_wait_seconds", "input waits"},
      {"send_wait_seconds", "send waits"},
      {"validation_check_seconds", "validation check"},
      {"reduction_wait_seconds", "reduction waits"},
      {"overhead_seconds", "executor overhead"},
  };
  return *parts;
}

const std::vector<BreakdownPart>& GapParts() {
  static const std::vector<BreakdownPart>* parts = new std::vector<BreakdownPart>{
      {"drain_seconds", "send drain"},
      {"validation_seconds", "validation"},
      {"embedding_exchange_seconds", "embedding exchange"},
      {"optimizer_seconds", "optimizer"},
      {"evaluation_seconds", "evaluation"},
      {"checkpoint_seconds", "checkpoint"},
      {"report_seconds", "reporting"},
      {"grant_seconds", "grant latency"},
      {"other_seconds", "other"},
  };
  return *parts;
}

void AddBreakdown(const v1::StepBreakdown& from, double factor, v1::StepBreakdown& to) {
  const google::protobuf::Descriptor* d = v1::StepBreakdown::descriptor();
  const google::protobuf::Reflection* r = to.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->cpp_type() != FieldDescriptor::CPPTYPE_DOUBLE) continue;
    r->SetDouble(&to, f, r->GetDouble(to, f) + factor * r->GetDouble(from, f));
  }
}

}  // namespace zbpp
