// api/schedule_version.h: the version in force at a step, over the
// coordinator's vector and the worker's map of versions.

#include "api/schedule_version.h"

#include <cstdint>
#include <map>
#include <vector>

#include "gtest/gtest.h"

namespace zbpp {
namespace {

v1::ScheduleVersion Version(int64_t number, int64_t effective_step) {
  v1::ScheduleVersion version;
  version.set_version(number);
  version.set_effective_step(effective_step);
  return version;
}

TEST(VersionInForce, NothingPublishedIsNull) {
  EXPECT_EQ(VersionInForce(std::vector<v1::ScheduleVersion>{}, 0), nullptr);
  EXPECT_EQ(VersionInForce(std::map<int64_t, v1::ScheduleVersion>{}, 7), nullptr);
}

TEST(VersionInForce, EachVersionHoldsFromItsEffectiveStepUntilTheNext) {
  const std::vector<v1::ScheduleVersion> versions = {Version(1, 5), Version(2, 9),
                                                     Version(3, 10)};
  EXPECT_EQ(VersionInForce(versions, 4), nullptr) << "before the first version";
  const int64_t expected[] = {1, 1, 1, 1, 2, 3, 3};  // Steps 5 to 11.
  for (int64_t step = 5; step <= 11; ++step) {
    const v1::ScheduleVersion* version = VersionInForce(versions, step);
    ASSERT_NE(version, nullptr) << "step " << step;
    EXPECT_EQ(version->version(), expected[step - 5]) << "step " << step;
    EXPECT_EQ(version, &versions[expected[step - 5] - 1]) << "points into the container";
  }
}

TEST(VersionInForce, AMapByVersionNumberReadsTheSame) {
  std::map<int64_t, v1::ScheduleVersion> versions;
  versions[1] = Version(1, 0);
  versions[2] = Version(2, 3);
  EXPECT_EQ(VersionInForce(versions, 0)->version(), 1);
  EXPECT_EQ(VersionInForce(versions, 2)->version(), 1);
  EXPECT_EQ(VersionInForce(versions, 3)->version(), 2);
  EXPECT_EQ(VersionInForce(versions, 100)->version(), 2);
}

// A calibration version published at the start step, after the plan that
// was effective there: the later one runs from that step.
TEST(VersionInForce, OfVersionsSharingAnEffectiveStepTheLaterWins) {
  const std::vector<v1::ScheduleVersion> versions = {Version(1, 0), Version(2, 0),
                                                     Version(3, 6), Version(4, 6)};
  EXPECT_EQ(VersionInForce(versions, 0)->version(), 2);
  EXPECT_EQ(VersionInForce(versions, 5)->version(), 2);
  EXPECT_EQ(VersionInForce(versions, 6)->version(), 4);
  std::map<int64_t, v1::ScheduleVersion> by_number;
  for (const v1::ScheduleVersion& v : versions) by_number[v.version()] = v;
  EXPECT_EQ(VersionInForce(by_number, 0)->version(), 2);
  EXPECT_EQ(VersionInForce(by_number, 7)->version(), 4);
}

}  // namespace
}  // namespace zbpp
