// The worker's own evaluation of a checkpoint, for export_test.py: builds
// the job's model chunks (worker/model) from the checkpoint files, draws
// the held-out batches the worker evaluates at a step (worker/data's
// LoadCorpus and SampleBatch), and writes each batch's inputs, targets,
// logits and loss, for the exported Hugging Face model to be compared with.
//
//   checkpoint_logits SPEC_JSON CHECKPOINT_DIR STEP EVAL_STEP BATCHES OUT
//
// SPEC_JSON: the JobSpec as JSON (proto field names). The checkpoint of STEP
// is read from CHECKPOINT_DIR/step-*/stage-*.pt (worker/data/checkpoint.h),
// parameters only. Batches 0..BATCHES-1 of eval step EVAL_STEP
// (StageTrainer::Evaluate's tag step). OUT receives, per batch: inputs and
// targets (int64 [b, s]), logits (float32 [b, s, vocab]), then the loss
// (float64), all little-endian, back to back. Exit 1 with one line on any
// error.

#include <torch/serialize.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "worker/data/checkpoint.h"
#include "worker/data/corpus.h"
#include "worker/data/sampler.h"
#include "worker/model/model_chunk.h"
#include "zbpp/v1/job_spec.pb.h"

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "checkpoint_logits: %s\n", message.c_str());
  return 1;
}

void Write(std::ofstream& out, const at::Tensor& tensor) {
  const at::Tensor t = tensor.contiguous();
  out.write(static_cast<const char*>(t.data_ptr()),
            static_cast<std::streamsize>(t.numel() * t.element_size()));
}

}  // namespace

int main(int argc, char** argv) {
  using namespace zbpp;
  if (argc != 7) return Fail("usage: SPEC_JSON CHECKPOINT_DIR STEP EVAL_STEP BATCHES OUT");
  std::ifstream spec_file(argv[1]);
  const std::string json((std::istreambuf_iterator<char>(spec_file)), {});
  v1::JobSpec spec;
  if (!google::protobuf::util::JsonStringToMessage(json, &spec).ok()) {
    return Fail(absl::StrCat(argv[1], ": not a JobSpec in JSON"));
  }
  int64_t step = 0, eval_step = 0;
  int batches = 0;
  if (!absl::SimpleAtoi(argv[3], &step) || !absl::SimpleAtoi(argv[4], &eval_step) ||
      !absl::SimpleAtoi(argv[5], &batches)) {
    return Fail("STEP, EVAL_STEP and BATCHES are integers");
  }
  absl::StatusOr<worker::ModelConfig> config = worker::ModelConfigFromSpec(spec.model());
  if (!config.ok()) return Fail(config.status().ToString());

  // One chunk per pipeline stage (the export covers one chunk per stage).
  const int stages = spec.pipeline().stages();
  std::vector<std::unique_ptr<worker::ModelChunk>> chunks;
  for (int stage = 0; stage < stages; ++stage) {
    auto chunk = worker::ModelChunk::Create(*config, stage, stages, spec.seed());
    if (!chunk.ok()) return Fail(chunk.status().ToString());
    torch::serialize::InputArchive archive;
    const std::string path = worker::CheckpointPath(argv[2], step, stage);
    try {
      archive.load_from(path);
    } catch (const std::exception& e) {
      return Fail(absl::StrCat(path, ": ", e.what()));
    }
    at::NoGradGuard no_grad;
    for (const auto& [name, parameter] : (*chunk)->parameters()) {
      at::Tensor stored;
      if (!archive.try_read(name, stored)) return Fail(absl::StrCat(path, " lacks ", name));
      parameter.copy_(stored);
    }
    chunks.push_back(*std::move(chunk));
  }

  worker::CorpusOptions corpus_options;
  corpus_options.seq_len = spec.model().seq_len();
  corpus_options.vocab = spec.model().vocab();
  auto corpus = worker::LoadCorpus(spec.dataset(), corpus_options);
  if (!corpus.ok()) return Fail(corpus.status().ToString());
  std::ofstream out(argv[6], std::ios::binary);
  at::NoGradGuard no_grad;
  for (int mb = 0; mb < batches; ++mb) {
    auto batch = worker::SampleBatch(**corpus, worker::Split::kEval, spec.seed(), eval_step, mb,
                                     spec.pipeline().microbatch_size(), spec.model().seq_len());
    if (!batch.ok()) return Fail(batch.status().ToString());
    at::Tensor x = batch->inputs;
    for (const auto& chunk : chunks) x = chunk->Forward(x);
    const at::Tensor logits = x.to(at::kFloat);
    const double loss = worker::LanguageModelLoss(logits, batch->targets).item<double>();
    Write(out, batch->inputs);
    Write(out, batch->targets);
    Write(out, logits);
    out.write(reinterpret_cast<const char*>(&loss), sizeof(loss));
  }
  return out.good() ? 0 : Fail(absl::StrCat(argv[6], ": write failed"));
}
