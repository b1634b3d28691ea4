#ifndef ZBPP_WORKER_DATA_SAMPLER_H_
#define ZBPP_WORKER_DATA_SAMPLER_H_

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "absl/status/statusor.h"
#include "worker/data/corpus.h"

namespace zbpp::worker {

/// One microbatch of next-token training data.
struct Batch {
  /// int64 CPU tensor [microbatch_size, seq_len] of token ids: in [0, 256)
  /// for text and synthetic data, in [0, model.vocab) for a token file.
  at::Tensor inputs;
  /// int64 CPU tensor [microbatch_size, seq_len]: targets[r][t] is the token
  /// that follows inputs[r][t] in the corpus (inputs shifted by one).
  at::Tensor targets;
};

/// Draws microbatch `microbatch` of step `step` (for Split::kEval: of eval
/// batch `step`) from `corpus`, deterministically.
///
/// Every row is a pure function of (corpus, split, seed, step, microbatch,
/// row): no RNG state is kept, so stage 0 (which feeds `inputs`) and the
/// last stage (which needs `targets`), in different processes, get the same
/// sequences for a (step, microbatch) whatever else each of them sampled,
/// and a resumed job gets the batches it would have had.
///
/// Definition (a change breaks reproducibility of existing jobs), with
/// `h(x1, ..., xk)` the key hash of common/counter_hash.h (HashCombine folded over
/// SplitMix64(x1)), UniformIndex as there, and `split` 0 for train, 1 for
/// eval:
/// * Stored corpus (text or token file) with N tokens in `split`: row r starts at
///   `UniformIndex(h(seed, split, step, microbatch, r), N - seq_len)`; inputs
///   are the seq_len tokens from there, targets the seq_len tokens one further.
/// * Synthetic corpus: row r is sequence
///   `s = h(seed, split, step, microbatch, r)`, reduced to
///   `UniformIndex(s, sequences)` when the corpus bounds them; its token j (for
///   j in [0, seq_len]) is `h(seed, 2 + split, s, j) & 255`.
///
/// Errors: InvalidArgument when microbatch_size < 1, seq_len < 1, or the
/// split holds fewer than seq_len + 1 tokens (LoadCorpus checked this for
/// its own seq_len). DataLoss naming the file when a token file changed
/// since LoadCorpus read it: it shrank below a row's window (TokenView::Read),
/// or an id now is >= corpus.vocab(), caught here before it reaches an
/// embedding. Blocking for a token file (one pread per row). Thread-safe
/// (reads the immutable corpus only).
absl::StatusOr<Batch> SampleBatch(const Corpus& corpus, Split split,
                                  uint64_t seed, int64_t step, int microbatch,
                                  int microbatch_size, int seq_len);

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_DATA_SAMPLER_H_
