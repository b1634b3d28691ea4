// ChooseTransport (coordinator/core/transport_choice.h): the job spec's
// transport resolved for the workers that would run the job.

#include "coordinator/core/transport_choice.h"

#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;

struct Gpu {
  std::string host;
  std::string identity;  // Empty: a CUDA worker that registered none.
  bool shared_test = false;
};

v1::WorkerDescription Cpu() {
  v1::WorkerDescription d;
  d.set_host("node");
  d.set_device_kind(v1::DEVICE_KIND_CPU);
  d.set_device_name("cpu");
  return d;
}

v1::WorkerDescription Cuda(const Gpu& gpu) {
  v1::WorkerDescription d;
  d.set_host(gpu.host);
  d.set_device_kind(v1::DEVICE_KIND_CUDA);
  d.set_device_name("cuda:0");
  d.set_device_identity(gpu.identity);
  d.set_nccl_shared_gpu_test(gpu.shared_test);
  return d;
}

// Worker i is "worker-<i+1>" at stage i % stages, replica i / stages.
std::vector<PlacedWorker> Placed(const std::vector<v1::WorkerDescription>& descriptions,
                                 int stages) {
  std::vector<PlacedWorker> placed;
  for (int i = 0; i < static_cast<int>(descriptions.size()); ++i) {
    placed.push_back({"worker-" + std::to_string(i + 1), i % stages, i / stages,
                      &descriptions[i]});
  }
  return placed;
}

TEST(ChooseTransportTest, AutoIsGlooForCpuWorkersNamingOne) {
  const std::vector<v1::WorkerDescription> d = {Cpu(), Cpu()};
  absl::StatusOr<TransportChoice> choice = ChooseTransport(v1::TRANSPORT_AUTO, Placed(d, 2));
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->transport, v1::TRANSPORT_GLOO);
  EXPECT_EQ(choice->reason, "auto: worker-1 (stage 0) has no GPU (device cpu)");
}

TEST(ChooseTransportTest, AutoIsNcclWhenEveryRankHasAGpuOfItsOwn) {
  // The same PCI bus id on two hosts is two GPUs.
  const std::vector<v1::WorkerDescription> d = {
      Cuda({"a", "0000:1B:00.0"}), Cuda({"a", "0000:1C:00.0"}), Cuda({"b", "0000:1B:00.0"})};
  absl::StatusOr<TransportChoice> choice = ChooseTransport(v1::TRANSPORT_AUTO, Placed(d, 3));
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->transport, v1::TRANSPORT_NCCL);
  EXPECT_EQ(choice->reason, "auto: every worker has a GPU of its own");
}

TEST(ChooseTransportTest, AutoIsGlooWhenTwoRanksShareAGpuEvenUnderTheTestSetting) {
  for (bool shared_test : {false, true}) {
    SCOPED_TRACE(shared_test);
    const std::vector<v1::WorkerDescription> d = {Cuda({"a", "0000:1B:00.0", shared_test}),
                                                  Cuda({"a", "0000:1C:00.0", shared_test}),
                                                  Cuda({"a", "0000:1B:00.0", shared_test})};
    absl::StatusOr<TransportChoice> choice = ChooseTransport(v1::TRANSPORT_AUTO, Placed(d, 3));
    ASSERT_TRUE(choice.ok()) << choice.status();
    EXPECT_EQ(choice->transport, v1::TRANSPORT_GLOO);
    EXPECT_EQ(choice->reason,
              "auto: worker-1 (stage 0) and worker-3 (stage 2) share GPU 0000:1B:00.0 on host a");
  }
}

TEST(ChooseTransportTest, AutoIsGlooForAGpuWorkerWithoutIdentity) {
  const std::vector<v1::WorkerDescription> d = {Cuda({"a", "0000:1B:00.0"}), Cuda({"a", ""})};
  absl::StatusOr<TransportChoice> choice = ChooseTransport(v1::TRANSPORT_AUTO, Placed(d, 2));
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->transport, v1::TRANSPORT_GLOO);
  EXPECT_EQ(choice->reason, "auto: worker-2 (stage 1) registered no device identity (cuda:0)");
}

TEST(ChooseTransportTest, GlooIsGlooOnAnyWorkers) {
  const std::vector<v1::WorkerDescription> d = {Cuda({"a", "0000:1B:00.0"}),
                                                Cuda({"a", "0000:1C:00.0"})};
  absl::StatusOr<TransportChoice> choice = ChooseTransport(v1::TRANSPORT_GLOO, Placed(d, 2));
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->transport, v1::TRANSPORT_GLOO);
  EXPECT_EQ(choice->reason, "gloo: as the job spec asks");
}

TEST(ChooseTransportTest, NcclOnAWorkerWithoutGpuIsRefusedNamingIt) {
  const std::vector<v1::WorkerDescription> d = {Cuda({"a", "0000:1B:00.0"}), Cpu()};
  absl::StatusOr<TransportChoice> choice = ChooseTransport(v1::TRANSPORT_NCCL, Placed(d, 2));
  EXPECT_EQ(choice.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(choice.status().message(),
            "transport: nccl needs a GPU of its own for every worker; worker-2 (stage 1) has no "
            "GPU (device cpu)");
  // The test setting does not give a CPU worker a GPU.
  v1::WorkerDescription cpu = Cpu();
  cpu.set_nccl_shared_gpu_test(true);
  const std::vector<v1::WorkerDescription> flagged = {cpu};
  EXPECT_EQ(ChooseTransport(v1::TRANSPORT_NCCL, Placed(flagged, 1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A worker the registry no longer describes counts as one without a GPU.
  EXPECT_THAT(ChooseTransport(v1::TRANSPORT_NCCL, {{"worker-9", 0, 0, nullptr}}).status().message(),
              HasSubstr("worker-9 (stage 0) has no GPU (device unknown)"));
}

TEST(ChooseTransportTest, NcclOnWorkersSharingAGpuIsRefusedNamingBoth) {
  // Replicas are named once the job has several.
  const std::vector<v1::WorkerDescription> d = {Cuda({"a", "0000:1B:00.0"}),
                                                Cuda({"a", "0000:1C:00.0"}),
                                                Cuda({"a", "0000:1D:00.0", true}),
                                                Cuda({"a", "0000:1B:00.0", true})};
  absl::StatusOr<TransportChoice> choice = ChooseTransport(v1::TRANSPORT_NCCL, Placed(d, 2));
  EXPECT_EQ(choice.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(choice.status().message(),
            "transport: nccl needs a GPU of its own for every worker; worker-1 (stage 0, replica "
            "0) and worker-4 (stage 1, replica 1) share GPU 0000:1B:00.0 on host a (allowed "
            "only when every worker on it runs zbpp-worker --nccl-shared-gpu-test-host-id, for "
            "tests)");
}

TEST(ChooseTransportTest, NcclOnWorkersSharingAGpuIsAllowedWhenEveryOneRunsTheTestSetting) {
  const std::vector<v1::WorkerDescription> d = {Cuda({"a", "0000:1B:00.0", true}),
                                                Cuda({"a", "0000:1B:00.0", true}),
                                                Cuda({"a", "0000:1B:00.0", true})};
  absl::StatusOr<TransportChoice> choice = ChooseTransport(v1::TRANSPORT_NCCL, Placed(d, 3));
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->transport, v1::TRANSPORT_NCCL);
  EXPECT_THAT(choice->reason, HasSubstr("shared-GPU test setting"));
  // One of three without it: refused, naming it and the first on that GPU.
  std::vector<v1::WorkerDescription> one_without = d;
  one_without[2].set_nccl_shared_gpu_test(false);
  EXPECT_THAT(ChooseTransport(v1::TRANSPORT_NCCL, Placed(one_without, 3)).status().message(),
              HasSubstr("worker-1 (stage 0) and worker-3 (stage 2) share GPU"));
}

TEST(ChooseTransportTest, NcclOnGpusOfTheirOwnIsNccl) {
  const std::vector<v1::WorkerDescription> d = {Cuda({"a", "0000:1B:00.0"}),
                                                Cuda({"b", "0000:1B:00.0"})};
  absl::StatusOr<TransportChoice> choice = ChooseTransport(v1::TRANSPORT_NCCL, Placed(d, 2));
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->transport, v1::TRANSPORT_NCCL);
  EXPECT_EQ(choice->reason, "nccl: every worker has a GPU of its own");
}

// One PCI bus id written two ways is one GPU: CUDA's upper case and
// 4-digit domain, nvidia-smi's 8-digit domain, sysfs's lower case. Before,
// the raw strings differed and the workers seemed to have GPUs of their own.
TEST(ChooseTransportTest, APciBusIdIsOneGpuHoweverItIsWritten) {
  const std::vector<v1::WorkerDescription> d = {Cuda({"a", "0000:1B:00.0"}),
                                                Cuda({"a", "00000000:1b:00.0"})};
  absl::StatusOr<TransportChoice> choice = ChooseTransport(v1::TRANSPORT_AUTO, Placed(d, 2));
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->transport, v1::TRANSPORT_GLOO);
  EXPECT_EQ(choice->reason,
            "auto: worker-1 (stage 0) and worker-2 (stage 1) share GPU 00000000:1b:00.0 on host a");
  EXPECT_EQ(GpuKey("a", "0000:1B:00.0"), GpuKey("a", "1b:00.0"));
  EXPECT_NE(GpuKey("a", "0000:1B:00.0"), GpuKey("a", "0000:1B:00.1"));
  EXPECT_NE(GpuKey("a", "0000:1B:00.0"), GpuKey("b", "0000:1B:00.0"));
  EXPECT_EQ(GpuKey("a", "not a pci id"), "other a not a pci id");
}

// In Kubernetes the host is the pod's name: two pods time-sharing one GPU
// register two hosts and the GPU's one UUID, which names it on any host.
TEST(ChooseTransportTest, AGpuUuidIsOneGpuOnAnyHost) {
  const std::string uuid = "GPU-5f0c9e7a-1b3d-4c6e-8f2a-0b1c3d5e7f90";
  const std::vector<v1::WorkerDescription> d = {Cuda({"pod-0", uuid}),
                                                Cuda({"pod-1", absl::AsciiStrToUpper(uuid)})};
  EXPECT_EQ(ChooseTransport(v1::TRANSPORT_NCCL, Placed(d, 2)).status().message(),
            "transport: nccl needs a GPU of its own for every worker; worker-1 (stage 0) and "
            "worker-2 (stage 1) share GPU " + absl::AsciiStrToUpper(uuid) +
            " (hosts pod-0 and pod-1) (allowed only when every worker on it runs zbpp-worker "
            "--nccl-shared-gpu-test-host-id, for tests)");
  const std::vector<v1::WorkerDescription> own = {
      Cuda({"pod-0", uuid}), Cuda({"pod-0", "GPU-00000000-1b3d-4c6e-8f2a-0b1c3d5e7f90"})};
  absl::StatusOr<TransportChoice> choice = ChooseTransport(v1::TRANSPORT_AUTO, Placed(own, 2));
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->transport, v1::TRANSPORT_NCCL);
}

// The worker choice of an NCCL job (JoinsNcclWorkers) knows a GPU however it
// is written, as ChooseTransport does.
TEST(JoinsNcclWorkersTest, AGpuAlreadyChosenIsRecognisedHoweverItIsWritten) {
  const v1::WorkerDescription chosen = Cuda({"a", "0000:1B:00.0"});
  const std::vector<const v1::WorkerDescription*> chosen_gpus = {&chosen};
  EXPECT_FALSE(JoinsNcclWorkers(Cuda({"a", "00000000:1b:00.0"}), chosen_gpus));
  EXPECT_TRUE(JoinsNcclWorkers(Cuda({"a", "0000:1C:00.0"}), chosen_gpus));
  EXPECT_TRUE(JoinsNcclWorkers(Cuda({"b", "0000:1B:00.0"}), chosen_gpus));
  const v1::WorkerDescription uuid = Cuda({"pod-0", "GPU-5F0C9E7A-0000-0000-0000-000000000001"});
  const std::vector<const v1::WorkerDescription*> pods = {&uuid};
  EXPECT_FALSE(JoinsNcclWorkers(Cuda({"pod-1", "gpu-5f0c9e7a-0000-0000-0000-000000000001"}), pods));
  EXPECT_FALSE(JoinsNcclWorkers(Cpu(), pods));
}

TEST(ChooseTransportTest, UnknownValueIsRefusedNamingTransport) {
  EXPECT_EQ(ChooseTransport(static_cast<v1::Transport>(9), {}).status().message(),
            "transport: unknown transport 9");
  EXPECT_EQ(TransportName(v1::TRANSPORT_NCCL), "NCCL");
  EXPECT_EQ(TransportName(v1::TRANSPORT_AUTO), "AUTO");
}

}  // namespace
}  // namespace zbpp::coordinator
