// What only the in-process fake promises beyond the conformance suite.

#include "worker/comm/in_process_communicator.h"

#include <string>
#include <thread>

#include <ATen/ATen.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zbpp::worker {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(InProcessCommunicatorTest, ShapeMismatchNamesBothShapes) {
  auto group = CreateInProcessGroup(2);
  auto send = group[0]->Send(at::zeros({2, 3}), 1, 9);
  ASSERT_TRUE(send.ok()) << send.status();
  EXPECT_TRUE((*send)->Wait(absl::ZeroDuration()).ok());  // Already copied.
  auto recv = group[1]->Recv(at::zeros({3, 2}, at::kDouble), 0, 9);
  ASSERT_TRUE(recv.ok()) << recv.status();
  absl::Status s = (*recv)->Wait(absl::Seconds(5));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("[2, 3] Float"), HasSubstr("[3, 2] Double"),
                    HasSubstr("peer 0, tag 9")));
}

TEST(InProcessCommunicatorTest, SendCopiesSoTheSenderMayReuseItsTensor) {
  auto group = CreateInProcessGroup(2);
  at::Tensor t = at::ones({4});
  ASSERT_TRUE(group[0]->Send(t, 1, 1).ok());
  t.zero_();
  at::Tensor in = at::zeros({4});
  auto recv = group[1]->Recv(in, 0, 1);
  ASSERT_TRUE(recv.ok());
  ASSERT_TRUE((*recv)->Wait(absl::Seconds(5)).ok());
  EXPECT_TRUE(at::equal(in, at::ones({4})));
}

TEST(InProcessCommunicatorTest, SameTagMessagesArriveInOrder) {
  auto group = CreateInProcessGroup(2);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(group[0]->Send(at::full({1}, static_cast<float>(i)), 1, 4).ok());
  }
  for (int i = 0; i < 3; ++i) {
    at::Tensor in = at::zeros({1});
    auto recv = group[1]->Recv(in, 0, 4);
    ASSERT_TRUE(recv.ok());
    ASSERT_TRUE((*recv)->Wait(absl::Seconds(5)).ok());
    EXPECT_EQ(in.item<float>(), i);
  }
}

TEST(InProcessCommunicatorTest, MismatchedCollectiveFailsOnEveryRank) {
  auto group = CreateInProcessGroup(2);
  absl::Status s0, s1;
  std::thread other([&] { s1 = group[1]->AllReduceSum(at::ones({3}), absl::Seconds(5)); });
  s0 = group[0]->AllReduceSum(at::ones({2}), absl::Seconds(5));
  other.join();
  EXPECT_EQ(s0.code(), absl::StatusCode::kInvalidArgument) << s0;
  EXPECT_EQ(s1.code(), absl::StatusCode::kInvalidArgument) << s1;
  EXPECT_THAT(std::string(s0.message()), HasSubstr("[3] Float"));
}

}  // namespace
}  // namespace zbpp::worker
