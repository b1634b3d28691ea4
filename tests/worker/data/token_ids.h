#ifndef ZBPP_TESTS_WORKER_DATA_TOKEN_IDS_H_
#define ZBPP_TESTS_WORKER_DATA_TOKEN_IDS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "worker/data/corpus.h"

namespace zbpp::worker::testing {

/// Every id of `view`, in order (TokenView::Read; an error fails the test).
inline std::vector<int64_t> Ids(const TokenView& view) {
  std::vector<int64_t> ids(static_cast<size_t>(view.size()));
  const absl::Status read = view.Read(0, view.size(), ids.data());
  EXPECT_TRUE(read.ok()) << read;
  return ids;
}

}  // namespace zbpp::worker::testing

#endif  // ZBPP_TESTS_WORKER_DATA_TOKEN_IDS_H_
