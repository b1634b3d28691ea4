#ifndef ZBPP_TESTING_FAKE_WORKER_H_
#define ZBPP_TESTING_FAKE_WORKER_H_

// The fake worker of the coordinator's tests, fuzzer and load benchmark: its
// Session messages go to the worker's own ControlState
// (worker/daemon/control_state.h), which decides what they mean (repeats,
// another job's or attempt's messages, monotone grants, the versions held,
// aborts and the next assignment), as in zbpp-worker; it answers a
// calibration request with a profile of given (or the assignment's) costs,
// then reports steps with timings simulated on the true costs instead of
// training.

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "api/schedule_proto.h"
#include "coordinator/core/coordinator.h"
#include "scheduler/problem.h"
#include "testing/fake_pipeline.h"
#include "worker/daemon/control_state.h"
#include "zbpp/v1/worker.pb.h"

namespace zbpp::coordinator::testing {

/// `spec` without calibration (SchedulePolicy.calibrate false): for tests
/// about something else, whose version numbers start at the plan's.
inline v1::JobSpec Uncalibrated(v1::JobSpec spec) {
  spec.mutable_schedule()->set_calibrate(false);
  return spec;
}

/// A worker driven by a test: applies its Session messages, takes each
/// assignment at once (it has no training thread to wait for) and drops it
/// when aborted, and reports steps with timings simulated on the true costs.
/// The fields after `state` show the held attempt as ControlState holds it,
/// plus what arrived, for the tests to assert on.
struct FakeWorker {
  std::string id;
  /// WorkerDescription.address and RegisterWorkerResponse.credential.
  std::string address;
  std::string credential;
  std::shared_ptr<SessionOutbox> outbox;
  /// Decides what each message means (shared: the worker stays movable).
  std::shared_ptr<worker::ControlState> state = std::make_shared<worker::ControlState>();
  /// The attempt held; none while idle or once aborted.
  std::optional<v1::Assignment> assignment;
  /// Its schedule versions (ascending) and highest grant, as of the last
  /// message; kept after an abort until the next assignment.
  std::vector<v1::ScheduleVersion> versions;
  int64_t granted = -1;
  /// For versions[1..]: the highest grant held when the version arrived.
  std::vector<int64_t> granted_at_version;
  int64_t next_step = 0;
  /// Aborts of the held attempt.
  int aborts = 0;
  absl::Status closed;
  std::map<int64_t, int64_t> version_of_step;
  /// Every schedule message popped while an attempt was held, as the outbox
  /// held it.
  std::vector<SessionMessage> schedule_messages;
  /// When set, every report carries this one-way latency to the next stage
  /// (the last stage has none).
  std::optional<double> one_way_seconds;
  /// The loss the last stage reports.
  double loss = 2.5;
  /// What its calibration profiles report (Assignment.profile): these
  /// costs when set, else the assignment's cost model echoed.
  std::optional<sched::Problem> profile_costs;
  /// What its calibration profiles report as layout parts when the
  /// assignment asks (Assignment.layout_part_blocks >= 1): three entries,
  /// virtual stages 0, 1 and 2 of the model cut into virtual stages of that
  /// many blocks; none when unset.
  std::optional<std::vector<sched::VirtualStageCost>> layout_parts;
  /// The attempt whose profile was taken (TakeProfile); 0 for none.
  int64_t profiled_attempt = 0;

  /// Applies one Session message, as SessionClient does.
  void Apply(const v1::SessionResponse& message) {
    state->Apply(message);
    if (assignment.has_value() && state->Aborted(assignment->job_id(), assignment->attempt())) {
      ++aborts;
      state->Finish(assignment->job_id(), assignment->attempt());
      assignment.reset();
    }
    if (!assignment.has_value()) {
      assignment = state->WaitForAssignment(absl::ZeroDuration());
      if (!assignment.has_value()) return;
      versions.clear();
      granted_at_version.clear();
      next_step = assignment->start_step();
    }
    std::optional<worker::ControlState::Held> held =
        state->HeldFor(assignment->job_id(), assignment->attempt());
    if (!held.has_value()) return;
    // Copies only the versions that are new (a version holds p·m·3 actions).
    for (size_t i = versions.size(); i < held->versions.size(); ++i) {
      if (!versions.empty()) granted_at_version.push_back(granted);
      versions.push_back(*held->versions[i]);
    }
    granted = held->granted;
  }

  /// Applies every message waiting in the outbox.
  void Drain() {
    std::vector<SessionMessage> messages;
    absl::Status s = outbox->Pop(absl::InfinitePast(), &messages);
    if (!s.ok()) closed = s;
    for (const SessionMessage& message : messages) {
      if (message->has_schedule() && assignment.has_value()) {
        schedule_messages.push_back(message);
      }
      Apply(*message);
    }
  }

  /// The profile the held attempt asks for (Assignment.profile), once per
  /// attempt: each of its virtual stages with the F/B/W seconds and M_B/M_W
  /// bytes of `profile_costs` or of the assignment's cost model; nullopt
  /// when none is due. The caller sends it (Coordinator::ReportProfile).
  std::optional<v1::ReportProfileRequest> TakeProfile() {
    if (!assignment.has_value() || !assignment->profile() ||
        profiled_attempt == assignment->attempt()) {
      return std::nullopt;
    }
    profiled_attempt = assignment->attempt();
    v1::ReportProfileRequest r;
    r.set_worker_id(id);
    r.set_job_id(assignment->job_id());
    r.set_attempt(assignment->attempt());
    r.set_stage(assignment->stage());
    r.set_replica(assignment->replica());
    r.set_repetitions(3);
    const sched::Problem costs =
        profile_costs.has_value()
            ? *profile_costs
            : *ProblemFromCostModel(assignment->schedule().schedule(),
                                    assignment->schedule().cost_model());
    auto add = [](int s, const sched::VirtualStageCost& c, v1::VirtualStageProfile* p) {
      p->set_virtual_stage(s);
      p->set_f_seconds(c.f_seconds);
      p->set_b_seconds(c.b_seconds);
      p->set_w_seconds(c.w_seconds);
      p->set_bw_seconds(c.bw_seconds);
      p->set_m_b_bytes(c.m_b_bytes);
      p->set_m_w_bytes(c.m_w_bytes);
    };
    for (int s : assignment->virtual_stages()) {
      add(s, costs.virtual_stages[s], r.add_virtual_stages());
    }
    if (assignment->layout_part_blocks() > 0 && layout_parts.has_value()) {
      for (int k = 0; k < static_cast<int>(layout_parts->size()); ++k) {
        add(k, (*layout_parts)[k], r.add_layout_parts());
      }
    }
    return r;
  }

  /// The version in force at `step` (ControlState::VersionFor); the first
  /// one before it takes effect.
  const v1::ScheduleVersion& VersionFor(int64_t step) const {
    worker::ControlState::VersionPtr in_force =
        state->VersionFor(assignment->job_id(), assignment->attempt(), step);
    for (const v1::ScheduleVersion& version : versions) {
      if (in_force != nullptr && version.version() == in_force->version()) return version;
    }
    return versions.front();
  }

  v1::ReportStepRequest Report(int64_t step, const sched::Problem& truth) {
    const v1::ScheduleVersion& version = VersionFor(step);
    const int stage = assignment->stage();
    v1::ReportStepRequest r;
    r.set_worker_id(id);
    r.set_job_id(assignment->job_id());
    r.set_attempt(assignment->attempt());
    r.set_step(step);
    r.set_schedule_version(version.version());
    r.set_stage(stage);
    r.set_replica(assignment->replica());
    double end = 0;
    double busy = 0;
    const auto& actions = version.schedule().stage_actions(stage).actions();
    const std::vector<sched::ActionTiming> timings = TrueTimings(version, truth, stage);
    for (size_t i = 0; i < timings.size(); ++i) {
      const sched::ActionTiming& t = timings[i];
      r.add_action_start_seconds(t.start_seconds);
      r.add_action_end_seconds(t.end_seconds);
      end = std::max(end, t.end_seconds);
      // A reduction overlaps the passes: not busy time.
      if (!absl::EndsWith(actions[static_cast<int>(i)], "REDUCE_GRAD")) {
        busy += t.end_seconds - t.start_seconds;
      }
    }
    r.set_step_seconds(end);
    r.set_idle_seconds(end - busy);
    if (stage == assignment->spec().pipeline().stages() - 1) r.set_loss(loss);
    if (one_way_seconds.has_value() &&
        stage + 1 < assignment->spec().pipeline().stages()) {
      v1::HopLatency* hop = r.add_hop_latencies();
      hop->set_to_stage(stage + 1);
      hop->set_one_way_seconds(*one_way_seconds);
    }
    version_of_step[step] = version.version();
    return r;
  }
};

}  // namespace zbpp::coordinator::testing

#endif  // ZBPP_TESTING_FAKE_WORKER_H_
