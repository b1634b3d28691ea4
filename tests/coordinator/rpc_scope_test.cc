// RpcScope (coordinator/service/rpc_scope.h) on a ServerContext whose
// metadata the test sets: the bearer token's verdicts and their counts, a
// method the table does not declare, and a worker method ending OK without
// its worker's credential checked. Every method against a real server is
// rpc_auth_test.cc's.

#include "coordinator/service/rpc_scope.h"

#include <grpcpp/server_context.h>
#include <grpcpp/test/server_context_test_spouse.h>

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "metrics/coordinator_metrics.h"
#include "prometheus/registry.h"
#include "tests/metrics/exposition.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;

class RpcScopeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_ = std::make_shared<prometheus::Registry>();
    metrics::CoordinatorMetrics::Options options;
    options.rpc_services = {"zbpp.v1.JobService"};
    metrics_ = *metrics::CoordinatorMetrics::Create(options, registry_);
  }

  double Sample(const std::string& name,
                const metrics::testing::LabelSet& labels) const {
    return metrics::testing::FindSample(metrics::testing::Serialize(*registry_),
                                        name, labels)
        .value_or(-1);
  }

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<metrics::CoordinatorMetrics> metrics_;
};

TEST_F(RpcScopeTest, TheBearerTokenIsCheckedWhenTheServerHasOne) {
  constexpr char kGetJob[] = "/zbpp.v1.JobService/GetJob";
  {
    grpc::ServerContext context;
    RpcScope rpc({metrics_.get(), ""}, context, kGetJob);
    EXPECT_TRUE(rpc.admitted().ok()) << rpc.admitted();
  }
  grpc::ServerContext missing;
  RpcScope refused({metrics_.get(), "s3cret"}, missing, kGetJob);
  EXPECT_EQ(refused.admitted().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(refused.admitted().message(),
            "missing \"authorization: Bearer <token>\" metadata");
  EXPECT_EQ(refused.Finish(refused.admitted()).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(
      Sample("zbpp_rpc_refusals_total",
             {{"service", "zbpp.v1.JobService"}, {"reason", "missing_token"}}),
      1);
  EXPECT_EQ(Sample("zbpp_rpc_duration_seconds_count",
                   {{"method", kGetJob}, {"code", "UNAUTHENTICATED"}}),
            1);
  // Wrong: another value of the same length, a prefix, the token without
  // "Bearer ".
  for (const char* wrong : {"Bearer s3creT", "Bearer s3cre", "s3cret"}) {
    grpc::ServerContext context;
    grpc::testing::ServerContextTestSpouse spouse(&context);
    spouse.AddClientMetadata("authorization", wrong);
    RpcScope rpc({metrics_.get(), "s3cret"}, context, kGetJob);
    EXPECT_EQ(rpc.admitted().code(), absl::StatusCode::kUnauthenticated)
        << wrong;
    EXPECT_EQ(rpc.admitted().message(), "wrong bearer token") << wrong;
  }
  EXPECT_EQ(
      Sample("zbpp_rpc_refusals_total",
             {{"service", "zbpp.v1.JobService"}, {"reason", "wrong_token"}}),
      3);
  grpc::ServerContext context;
  grpc::testing::ServerContextTestSpouse spouse(&context);
  spouse.AddClientMetadata("authorization", "Bearer s3cret");
  RpcScope rpc({metrics_.get(), "s3cret"}, context, kGetJob);
  EXPECT_TRUE(rpc.admitted().ok()) << rpc.admitted();
  EXPECT_TRUE(rpc.Finish(absl::NotFoundError("job job-9")).error_code() ==
              grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Sample("zbpp_rpc_duration_seconds_count",
                   {{"method", kGetJob}, {"code", "NOT_FOUND"}}),
            1);
}

TEST_F(RpcScopeTest, AMethodTheTableDoesNotDeclareIsRefused) {
  grpc::ServerContext context;
  RpcScope rpc({metrics_.get(), ""}, context, "/zbpp.v1.JobService/Undeclared");
  EXPECT_EQ(rpc.admitted().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(rpc.admitted().message()),
              HasSubstr("no caller check declared"));
}

// The table, not the handler, says which calls a worker's credential
// guards: a handler of such a method that never checked it cannot end OK.
TEST_F(RpcScopeTest, AWorkerMethodCannotEndOkWithoutTheWorkersCredential) {
  grpc::ServerContext context;
  RpcScope rpc({metrics_.get(), ""}, context,
               "/zbpp.v1.WorkerService/ReportStep");
  ASSERT_TRUE(rpc.admitted().ok());
  const grpc::Status finished = rpc.Finish(absl::OkStatus());
  EXPECT_EQ(finished.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_THAT(finished.error_message(),
              HasSubstr("without checking the worker credential"));
  // Another outcome passes through as it is.
  grpc::ServerContext other;
  RpcScope refused({metrics_.get(), ""}, other,
                   "/zbpp.v1.WorkerService/ReportStep");
  EXPECT_EQ(
      refused
          .Finish(absl::InvalidArgumentError("worker_id and job_id: required"))
          .error_code(),
      grpc::StatusCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace zbpp::coordinator
