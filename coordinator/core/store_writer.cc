#include "coordinator/core/store_writer.h"

#include <cstdio>
#include <utility>

namespace zbpp::coordinator {

absl::StatusOr<std::unique_ptr<StoreWriter>> StoreWriter::Create(
    Options options) {
  if (options.store == nullptr) {
    return absl::InvalidArgumentError("StoreWriter::Options.store is null");
  }
  std::unique_ptr<StoreWriter> writer(new StoreWriter(options));
  writer->thread_ = std::thread([w = writer.get()] { w->Run(); });
  return writer;
}

StoreWriter::~StoreWriter() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void StoreWriter::Enqueue(Write write, std::string context,
                          bool ignore_already_exists) {
  absl::MutexLock lock(&mu_);
  queue_.push_back({std::move(write), std::move(context), ignore_already_exists});
  ++enqueued_;
}

void StoreWriter::Flush() {
  absl::MutexLock lock(&mu_);
  const int64_t target = enqueued_;
  auto done = [this, target]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return applied_ >= target;
  };
  mu_.Await(absl::Condition(&done));
}

int64_t StoreWriter::Pending() const {
  absl::MutexLock lock(&mu_);
  return enqueued_ - applied_;
}

void StoreWriter::Run() {
  while (true) {
    Item item;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !queue_.empty() || stopping_;
      };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // Stopping, and everything is applied.
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    // The store call runs without mu_: Enqueue never waits for SQLite.
    const absl::Status status = item.write(*options_.store);
    if (!status.ok() &&
        !(item.ignore_already_exists && absl::IsAlreadyExists(status))) {
      std::fprintf(stderr, "zbpp-coordinator: %s: %s\n", item.context.c_str(),
                   status.ToString().c_str());
    }
    absl::MutexLock lock(&mu_);
    ++applied_;
  }
}

}  // namespace zbpp::coordinator
