#ifndef ZBPP_COMMON_INDICES_H_
#define ZBPP_COMMON_INDICES_H_

// The indices of a pipeline, each a type of its own, so that a stage passed
// where a virtual stage is expected, or a worker index where a stage is, does
// not compile (docs/architecture.md, "Vocabulary"). As Megatron qualifies
// every rank (pipeline-parallel, data-parallel) and PyTorch pipelining
// converts with `stage_index_to_group_rank`, every conversion between them has
// a name: `WorkerOf(Stage, Replica, stages)`, `StageOfWorker`,
// `ReplicaOfWorker` here, `Schedule::StageOf(VirtualStage)` in
// scheduler/schedule.h. A position inside one communicator group (a rank) is
// worker/comm/'s own and has no type here.

#include <cstddef>
#include <functional>
#include <ostream>
#include <utility>
#include <vector>

namespace zbpp {

/// A non-negative index of one kind, told apart from every other kind by its
/// `Tag`. Constructed from an int only explicitly (`Stage(2)`), read with
/// `value()`; compared, hashed (absl and std::hash), printed (`<<`; the
/// absl of Debian 12 predates AbslStringify, so absl::StrCat takes
/// `value()`) and incremented (`++s`, for loops) like an int, but never
/// converted to one or to another kind implicitly. Plain value type;
/// thread-compatible.
template <typename Tag>
class Index {
 public:
  constexpr Index() = default;
  constexpr explicit Index(int value) : value_(value) {}

  /// The index as an int, for arithmetic, protobuf fields and containers
  /// that are not IndexedVector.
  constexpr int value() const { return value_; }

  constexpr Index& operator++() {
    ++value_;
    return *this;
  }
  constexpr Index operator++(int) {
    Index before = *this;
    ++value_;
    return before;
  }

  friend constexpr bool operator==(Index a, Index b) { return a.value_ == b.value_; }
  friend constexpr bool operator!=(Index a, Index b) { return a.value_ != b.value_; }
  friend constexpr bool operator<(Index a, Index b) { return a.value_ < b.value_; }
  friend constexpr bool operator<=(Index a, Index b) { return a.value_ <= b.value_; }
  friend constexpr bool operator>(Index a, Index b) { return a.value_ > b.value_; }
  friend constexpr bool operator>=(Index a, Index b) { return a.value_ >= b.value_; }

  template <typename H>
  friend H AbslHashValue(H h, Index i) {
    return H::combine(std::move(h), i.value_);
  }
  friend std::ostream& operator<<(std::ostream& os, Index i) { return os << i.value_; }

 private:
  int value_ = 0;
};

struct StageTag {};
struct VirtualStageTag {};
struct ReplicaTag {};
struct WorkerIndexTag {};

/// A stage: one position in the pipeline, in [0, p) (`Schedule::stages`,
/// `PipelineSpec.stages`); the unit a schedule gives a list of actions.
using Stage = Index<StageTag>;
/// A virtual stage: one piece of the model in model order, in [0, p·v).
using VirtualStage = Index<VirtualStageTag>;
/// A replica: one data-parallel copy of the pipeline, in [0, d).
using Replica = Index<ReplicaTag>;
/// A worker's place among a job's p·d workers, in [0, p·d): r·p + s
/// (WorkerOf).
using WorkerIndex = Index<WorkerIndexTag>;

/// The `count` indices of kind `I` from I(0) to I(count - 1), for
/// `for (Stage s : IndicesOf<Stage>(p))`. An empty range when count <= 0.
template <typename I>
class IndicesOf {
 public:
  class iterator {
   public:
    constexpr explicit iterator(int at) : at_(at) {}
    constexpr I operator*() const { return I(at_); }
    constexpr iterator& operator++() {
      ++at_;
      return *this;
    }
    friend constexpr bool operator==(iterator a, iterator b) { return a.at_ == b.at_; }
    friend constexpr bool operator!=(iterator a, iterator b) { return a.at_ != b.at_; }

   private:
    int at_;
  };

  constexpr explicit IndicesOf(int count) : count_(count > 0 ? count : 0) {}
  constexpr iterator begin() const { return iterator(0); }
  constexpr iterator end() const { return iterator(count_); }

 private:
  int count_;
};

/// The worker index of stage `s` of replica `r` in a pipeline of `stages`
/// stages: r·p + s, the one order of a job's p·d workers (the p stages of
/// replica 0, then those of replica 1, ...) in which the coordinator takes
/// them and keys their assignments and step reports
/// (`WorkerRecord::worker_index`). Pure.
constexpr WorkerIndex WorkerOf(Stage s, Replica r, int stages) {
  return WorkerIndex(r.value() * stages + s.value());
}
/// The stage of worker `k` (WorkerOf's inverse, with ReplicaOfWorker). Pure.
constexpr Stage StageOfWorker(WorkerIndex k, int stages) { return Stage(k.value() % stages); }
/// The replica of worker `k`. Pure.
constexpr Replica ReplicaOfWorker(WorkerIndex k, int stages) {
  return Replica(k.value() / stages);
}

/// A vector indexed by one kind of index only: `IndexedVector<Stage, double>`
/// takes `v[Stage(1)]` and refuses `v[VirtualStage(1)]` or `v[1]` at compile
/// time. Holds a std::vector (`vector()` for code that needs one, e.g. a
/// protobuf field's assignment). Plain value type; thread-compatible.
template <typename I, typename T>
class IndexedVector {
 public:
  IndexedVector() = default;
  /// `count` copies of `value`.
  explicit IndexedVector(int count, const T& value = T())
      : items_(count > 0 ? static_cast<size_t>(count) : 0, value) {}
  /// Adopts `items`, item i at I(i).
  explicit IndexedVector(std::vector<T> items) : items_(std::move(items)) {}

  T& operator[](I i) { return items_[static_cast<size_t>(i.value())]; }
  const T& operator[](I i) const { return items_[static_cast<size_t>(i.value())]; }

  int size() const { return static_cast<int>(items_.size()); }
  bool empty() const { return items_.empty(); }
  /// The valid indices, I(0) to I(size() - 1).
  IndicesOf<I> indices() const { return IndicesOf<I>(size()); }
  void push_back(T item) { items_.push_back(std::move(item)); }
  void assign(int count, const T& value) {
    items_.assign(count > 0 ? static_cast<size_t>(count) : 0, value);
  }

  auto begin() { return items_.begin(); }
  auto end() { return items_.end(); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

  const std::vector<T>& vector() const { return items_; }

  friend bool operator==(const IndexedVector& a, const IndexedVector& b) {
    return a.items_ == b.items_;
  }
  friend bool operator!=(const IndexedVector& a, const IndexedVector& b) { return !(a == b); }

 private:
  std::vector<T> items_;
};

}  // namespace zbpp

namespace std {
template <typename Tag>
struct hash<zbpp::Index<Tag>> {
  size_t operator()(zbpp::Index<Tag> i) const { return hash<int>()(i.value()); }
};
}  // namespace std

#endif  // ZBPP_COMMON_INDICES_H_
