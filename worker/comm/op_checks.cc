#include "worker/comm/op_checks.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zbpp::worker {

std::string DescribeOp(bool send, int rank, int peer, uint32_t tag) {
  return absl::StrCat("rank ", rank, send ? " send to" : " recv from",
                      " peer ", peer, ", tag ", tag);
}

std::string DescribeTensor(const at::Tensor& tensor) {
  if (!tensor.defined()) return "undefined";
  return absl::StrCat("[", absl::StrJoin(tensor.sizes(), ", "), "] ",
                      std::string(c10::toString(tensor.scalar_type())));
}

absl::Status CheckPointToPoint(bool send, int rank, int size, int peer,
                               uint32_t tag, const at::Tensor& tensor) {
  if (peer < 0 || peer >= size || peer == rank) {
    return absl::InvalidArgumentError(
        absl::StrCat(DescribeOp(send, rank, peer, tag), ": peer must be another rank in [0, ",
                     size, ")"));
  }
  if (!tensor.defined() || !tensor.is_contiguous()) {
    return absl::InvalidArgumentError(
        absl::StrCat(DescribeOp(send, rank, peer, tag),
                     ": the tensor must be defined and contiguous (got ",
                     DescribeTensor(tensor), ")"));
  }
  return absl::OkStatus();
}

}  // namespace zbpp::worker
