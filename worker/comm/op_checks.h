#ifndef ZBPP_WORKER_COMM_OP_CHECKS_H_
#define ZBPP_WORKER_COMM_OP_CHECKS_H_

// Argument checks and error wording shared by the Communicator backends, so
// every backend rejects the same calls with the same messages.

#include <cstdint>
#include <string>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"

namespace zbpp::worker {

/// "rank 0 send to peer 1, tag 42": names one point-to-point operation in
/// error messages. `send` picks "send to" / "recv from".
std::string DescribeOp(bool send, int rank, int peer, uint32_t tag);

/// "[2, 3] Float": a tensor's shape and dtype for error messages;
/// "undefined" for an undefined tensor.
std::string DescribeTensor(const at::Tensor& tensor);

/// OK when `peer` is another rank of a group of `size` seen from `rank` and
/// `tensor` is defined and contiguous; else InvalidArgument naming the
/// operation (DescribeOp) and the reason. Thread-safe (pure).
absl::Status CheckPointToPoint(bool send, int rank, int size, int peer,
                               uint32_t tag, const at::Tensor& tensor);

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_COMM_OP_CHECKS_H_
